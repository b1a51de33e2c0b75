package storage

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
)

// BenchmarkRollupTargets names the tier series of raw series as a rollup
// of new windows does (no held versions): the four gauge aggregates of
// one series and the counter of another, per op. In bench/ingest at 100k
// series these names were 1.4% of the appliance's CPU (issue 17).
func BenchmarkRollupTargets(b *testing.B) {
	const n = 1000
	gauges := make([]labels.Labels, n)
	counters := make([]labels.Labels, n)
	for i := range n {
		inst := "10.0.0." + strconv.Itoa(i%250) + ":8000"
		gauges[i] = labels.FromStrings("__name__", "vllm:num_requests_running", "engine", "0",
			"instance", inst, "job", "vllm", "model_name", "llama-3.1-8b-instruct")
		counters[i] = labels.FromStrings("__name__", "vllm:e2e_request_latency_seconds_bucket", "engine", "0",
			"instance", inst, "job", "vllm", "le", strconv.Itoa(i%20), "model_name", "llama-3.1-8b-instruct")
	}
	rb := &rollupBatch{}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := rb.gaugeTargets(gauges[i%n]); err != nil {
			b.Fatal(err)
		}
		if _, err := rb.targetAgg(counters[i%n], aggCounter.String()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRollup1m rolls one minute of 2,000 raw series (half gauges,
// half counters, four samples each) up into the 1m tier per op, as the
// downsampler does every minute; the minute's samples are appended and
// flushed outside the timer.
func BenchmarkRollup1m(b *testing.B) {
	db := openTestDB(b, b.TempDir(), nil)
	const perKind = 1000
	var lsets []labels.Labels
	for i := range perKind {
		inst := "10.0.0." + strconv.Itoa(i%250) + ":8000"
		lsets = append(lsets,
			labels.FromStrings("__name__", "vllm:num_requests_running", "instance", inst, "job", "vllm", "i", strconv.Itoa(i)),
			labels.FromStrings("__name__", "vllm:request_success_total", "instance", inst, "job", "vllm", "i", strconv.Itoa(i)))
	}
	const minute = int64(60_000)
	start := (time.Now().Add(-6*24*time.Hour).UnixMilli()/minute - 1) * minute
	ctx := context.Background()
	w := start
	for b.Loop() {
		b.StopTimer()
		app := db.AppenderV2(ctx)
		for k := range 4 {
			for i, ls := range lsets {
				if _, err := app.Append(0, ls, 0, w+1+int64(k)*15_000, float64(int(w/minute)+i+k), nil, nil, promstorage.AOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
		db.Flush()
		b.StartTimer()
		st, err := db.Rollup(ctx, Tier1m, time.UnixMilli(w), time.UnixMilli(w+minute))
		if err != nil {
			b.Fatal(err)
		}
		if st.Series != len(lsets) {
			b.Fatalf("rolled up %d series, want %d", st.Series, len(lsets))
		}
		w += minute
	}
}
