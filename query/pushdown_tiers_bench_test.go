package query

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/downsample"
	"github.com/aiserve/appliance/storage"
)

// BenchmarkPushdownTiers times the tiers bench's queries on the data of
// a `go run ./bench/tiers -keep-data` run, with the aggregation pushdown
// on and off, in process: no HTTP, no query_range cache, the same
// storage.DB (its tiers, step reads and split parts) as the appliance,
// with the rollup tiers' watermarks the downsampler loads at start.
// TIERS_RUN is the run's directory (bench/out/tiers-<time>); its
// appliance-data is copied to a temp dir first. Without it the benchmark
// is skipped.
//
//	TIERS_RUN=$PWD/bench/out/tiers-20261202-000021 go test ./query -run '^$' -bench PushdownTiers -count 6
func BenchmarkPushdownTiers(b *testing.B) {
	run := os.Getenv("TIERS_RUN")
	if run == "" {
		b.Skip("TIERS_RUN is not set")
	}
	raw, err := os.ReadFile(filepath.Join(run, "data.json"))
	require.NoError(b, err)
	var data struct{ End time.Time }
	require.NoError(b, json.Unmarshal(raw, &data))
	dir := b.TempDir()
	require.NoError(b, os.CopyFS(dir, os.DirFS(filepath.Join(run, "appliance-data"))))
	opts := storage.DefaultOptions()
	opts.Path = dir
	opts.RetentionRaw, opts.Retention1m, opts.Retention5m = 7*24*time.Hour, 30*24*time.Hour, 90*24*time.Hour
	db, err := storage.Open(opts)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, db.Close()) })
	// The rollup tiers' watermarks, from the state file: without them
	// every read is planned on raw (which holds the last 7 days only).
	_, err = downsample.New(db, downsample.Options{})
	require.NoError(b, err)
	require.False(b, db.RolledUpTo(storage.Tier5m).IsZero())

	p95 := `histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))`
	maxq := `max_over_time(vllm:num_requests_waiting[1h])`
	day := 24 * time.Hour
	ranges := []struct {
		name      string
		rng, step time.Duration
	}{ // bench/tiers' grid: about 500 steps
		{"1h", time.Hour, 15 * time.Second},
		{"24h", day, 3 * time.Minute},
		{"7d", 7 * day, 20 * time.Minute},
		{"30d", 30 * day, 85 * time.Minute},
		{"90d", 90 * day, 260 * time.Minute},
	}
	for _, q := range []struct{ name, qs string }{{"p95", p95}, {"maxq", maxq}} {
		for _, r := range ranges {
			for _, pushdown := range []bool{true, false} {
				name := q.name + "-" + r.name + "/pushdown=off"
				if pushdown {
					name = q.name + "-" + r.name + "/pushdown=on"
				}
				b.Run(name, func(b *testing.B) {
					e := New(Options{NoPushdown: !pushdown}, nil, nil)
					b.Cleanup(func() { _ = e.Close() })
					ctx := context.Background()
					start := data.End.Add(-r.rng)
					cpu0 := processCPU(b)
					for b.Loop() {
						qq, err := e.NewRangeQuery(ctx, db, nil, q.qs, start, data.End, r.step)
						require.NoError(b, err)
						res := qq.Exec(ctx)
						require.NoError(b, res.Err)
						qq.Close()
					}
					b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
