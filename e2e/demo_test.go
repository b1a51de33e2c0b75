package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDemo runs `appliance demo` as a newcomer would and sees vLLM data,
// including a P95 latency from histogram buckets, within a minute.
func TestDemo(t *testing.T) {
	p := startDemo(t, 2)
	eventually(t, 60*time.Second, "both instances' two models scraped", func() bool {
		v := p.instant(`count(vllm:num_requests_running)`, time.Time{})
		return len(v) == 1 && value(t, v[0]) == 4
	})
	// rate() needs two scrapes 5 s apart.
	q := `histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[1m])))`
	eventually(t, 60*time.Second, "P95 e2e latency per model", func() bool {
		return len(p.instant(q, time.Time{})) == 2
	})
	for _, s := range p.instant(q, time.Time{}) {
		v := value(t, s)
		require.Greater(t, v, 0.0, fmt.Sprint(s.Metric))
		require.Less(t, v, 120.0, fmt.Sprint(s.Metric))
	}
	exit, took := p.stop()
	require.Equal(t, 0, exit)
	require.Less(t, took, 5*time.Second)
}
