package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/storage/storagetest"
)

// BenchmarkPushdown times the tiers bench's queries (bench/tiers: the p95
// of a vLLM latency histogram and the longest queue) at 1 and 24 hours
// over the appliance's storage in a temp dir, with the aggregation
// pushdown on and off: 3 models × 2 instances × 24 buckets and a queue
// gauge, 26 hours at 15 s.
//
//	go test ./query -run '^$' -bench Pushdown -count 6
func BenchmarkPushdown(b *testing.B) {
	db := storagetest.Open(b)
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	first := now.Add(-26 * time.Hour).UnixMilli()
	les := []string{"0.3", "0.5", "0.8", "1", "1.5", "2", "2.5", "5", "10", "15", "20", "30", "40", "50", "60",
		"120", "240", "480", "960", "1920", "7680", "15360", "30720", "+Inf"}
	app := db.Appender(context.Background())
	for m := range 3 {
		for i := range 2 {
			base := []string{"model_name", fmt.Sprintf("model-%d", m), "instance", fmt.Sprintf("10.0.0.%d:8000", i), "job", "vllm"}
			counts := make([]float64, len(les))
			for ts := first; ts <= now.UnixMilli(); ts += 15_000 {
				n := float64(rng.IntN(20))
				for k := range les {
					counts[k] += n * float64(k+1) / float64(len(les))
					_, err := app.Append(0, labels.FromStrings(append([]string{"__name__", "vllm:e2e_request_latency_seconds_bucket", "le", les[k]}, base...)...), ts, counts[k])
					require.NoError(b, err)
				}
				_, err := app.Append(0, labels.FromStrings(append([]string{"__name__", "vllm:num_requests_waiting"}, base...)...), ts, float64(rng.IntN(50)))
				require.NoError(b, err)
			}
		}
	}
	require.NoError(b, app.Commit())
	db.Flush()

	p95 := `histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))`
	maxq := `max_over_time(vllm:num_requests_waiting[1h])`
	for _, c := range []struct {
		name, qs  string
		rng, step time.Duration
	}{
		{"p95-1h", p95, time.Hour, 15 * time.Second},
		{"p95-24h", p95, 24 * time.Hour, 3 * time.Minute},
		{"maxq-1h", maxq, time.Hour, 15 * time.Second},
		{"maxq-24h", maxq, 24 * time.Hour, 3 * time.Minute},
	} {
		for _, pushdown := range []bool{true, false} {
			name := c.name + "/pushdown=off"
			if pushdown {
				name = c.name + "/pushdown=on"
			}
			b.Run(name, func(b *testing.B) {
				e := New(Options{NoPushdown: !pushdown}, nil, nil)
				b.Cleanup(func() { _ = e.Close() })
				ctx := context.Background()
				cpu0 := processCPU(b)
				for b.Loop() {
					q, err := e.NewRangeQuery(ctx, db, nil, c.qs, now.Add(-c.rng), now, c.step)
					require.NoError(b, err)
					res := q.Exec(ctx)
					require.NoError(b, res.Err)
					q.Close()
				}
				// CPU time, which the other work on a shared box moves
				// less than the wall time.
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the user and system CPU time of the process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
