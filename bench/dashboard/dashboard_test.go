package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRelabel(t *testing.T) {
	page := []byte("# HELP x y\n# TYPE x counter\nx_total 3\nvllm:num_requests_running{model_name=\"m\",engine=\"0\"} 1.5\nempty{} 2\n")
	got := relabel(nil, page, []byte(`job="vllm",instance="10.1.0.1:8000"`), []byte("1000"))
	require.Equal(t, `x_total{job="vllm",instance="10.1.0.1:8000"} 3 1000
vllm:num_requests_running{job="vllm",instance="10.1.0.1:8000",model_name="m",engine="0"} 1.5 1000
empty{job="vllm",instance="10.1.0.1:8000"} 2 1000
`, string(got))
}

// The placeholders are filled as ui/web/src/util.js fills them, so the
// expressions match the ones the Overview sends.
func TestSubstitute(t *testing.T) {
	require.Equal(t, "90s", promDur(90))
	require.Equal(t, "5m", promDur(300))
	require.Equal(t, "2h", promDur(7200))
	require.Equal(t, "1d", promDur(86400))
	require.Equal(t, `sum(rate(x{job="a"}[1m])) by 30s`, substitute(`sum(rate(x{$sel}[$__rate_interval])) by $__interval`, 30, `job="a"`))
	require.Equal(t, `rate(x{}[10m])`, substitute(`rate(x{$sel}[$__rate_interval])`, 600, ""))
}

// vmui gets the `sum by (le)` query the Overview sends for all the
// quantiles of one histogram, as the page takes it apart.
func TestQuantileInner(t *testing.T) {
	in := `sum by (le) (rate(x_bucket{job="a"}[10m]))`
	require.Equal(t, in, quantileInner(`histogram_quantile(0.95, `+in+`)`))
	require.Equal(t, in, quantileInner(`histogram_quantile(.5,`+in+`)`))
	require.Empty(t, quantileInner(`histogram_quantile(0.95, rate(x_bucket[5m]))`))
	require.Empty(t, quantileInner(`sum(rate(x[5m]))`))
}

func TestOnePoint(t *testing.T) {
	require.True(t, onePoint("http://x/api/v1/query_range?query=up&start=1700000000&end=1700000000&step=600"))
	require.False(t, onePoint("http://x/api/v1/query_range?query=up&start=1699990000&end=1700000000&step=600"))
}
