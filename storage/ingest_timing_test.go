package storage

import (
	"context"
	"strconv"
	"testing"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// BenchmarkAppendScrapes100k is the append path at issue 17's ingest
// scale: 100,000 series (1,000 families of 100, vLLM-like labels) in
// scrapes of 1,000 series, each one appender with the refs of the
// previous scrape and the metadata, then Commit: the series cache, the
// WAL (written, not fsynced, as scrapes run) and the head. One op is one
// round of all 100 scrapes, after a first round that
// named every series. At this scale the per-ref maps miss the CPU
// caches, which BenchmarkAppend's 10,000 series hide.
func BenchmarkAppendScrapes100k(b *testing.B) {
	const families, perFamily, perScrape = 1000, 100, 1000
	opts := DefaultOptions()
	opts.Path = b.TempDir()
	db, err := Open(opts)
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	lsets := make([]labels.Labels, 0, families*perFamily)
	fams := make([]string, 0, families*perFamily)
	for i := range families * perFamily {
		name := "vllm:bench_metric_" + strconv.Itoa(i%families) + "_total"
		lsets = append(lsets, labels.FromStrings(
			"__name__", name, "instance", "10.0."+strconv.Itoa(i/families/10)+"."+strconv.Itoa(i/families%10)+":8000",
			"job", "vllm", "model_name", "meta-llama/Llama-3.1-8B-Instruct", "engine", "0"))
		fams = append(fams, name)
	}
	meta := metadata.Metadata{Type: model.MetricTypeCounter, Help: "A benchmark counter."}
	refs := make([]promstorage.SeriesRef, len(lsets))
	start := time.Now().Add(-6 * 24 * time.Hour).UnixMilli()
	round := func(n int) {
		ts := start + int64(n)*5000
		for s := 0; s < len(lsets); s += perScrape {
			e := s + perScrape
			appendScrape(b, context.Background(), db, lsets[s:e], fams[s:e], refs[s:e], meta, ts, n, s)
		}
	}
	round(0) // every series known: the steady state of a scrape
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		round(n + 1)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lsets)), "ns/sample")
}

// BenchmarkHeadRead is the head's side of two readers the ingest profile
// showed (issue 17): the release detector's selector, which names no
// metric and matches a label few series have, and the label values of
// one label without matchers (the dashboard's extra labels). The head
// holds 100,000 series, 1% of them with a version label.
func BenchmarkHeadRead(b *testing.B) {
	const n = 100_000
	h := newHead(nil)
	rows := make([]vmstorage.MetricRow, n)
	refs := make([]uint64, n)
	for i := range rows {
		ls := labels.NewBuilder(labels.FromStrings("__name__", "vllm:metric_"+strconv.Itoa(i%1000),
			"instance", "10.0.0."+strconv.Itoa(i/1000)+":8000", "job", "vllm", "model_name", "llama"))
		if i%100 == 0 {
			ls.Set("version", "v"+strconv.Itoa(i/10_000))
		}
		raw, err := marshalRawName(nil, ls.Labels())
		require.NoError(b, err)
		rows[i] = vmstorage.MetricRow{MetricNameRaw: raw, Timestamp: 1000, Value: 1}
		refs[i] = uint64(i+1) * 0x9e3779b97f4a7c15 &^ collisionRefBit
	}
	h.add(rows, refs, nil, nil)
	b.Run("select", func(b *testing.B) {
		ms := []*labels.Matcher{
			labels.MustNewMatcher(labels.MatchNotRegexp, "__name__", "(go|python|process|appliance)_.*"),
			labels.MustNewMatcher(labels.MatchNotEqual, "version", ""),
		}
		b.ReportAllocs()
		for b.Loop() {
			if got := h.read(ms, 0, 2000, false); len(got) != n/100 {
				b.Fatalf("%d series, want %d", len(got), n/100)
			}
		}
	})
	b.Run("label_values", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got := h.labelValues("version", nil, 0, 2000); len(got) != n/10_000 {
				b.Fatalf("%d values, want %d", len(got), n/10_000)
			}
		}
	})
}

// BenchmarkHeadFlushWrites is the head's batched write at issue 17's
// scale: 100,000 series get a minute of samples at 5 s (12 adds), then a
// flush hands them to VictoriaMetrics (here a write that only counts the
// rows). One op is the minute and its flush; B/op is what the head
// allocates for it.
func BenchmarkHeadFlushWrites(b *testing.B) {
	const n, perMinute = 100_000, 12
	h := newHead(nil)
	written := 0
	h.write = func(rows []vmstorage.MetricRow) error {
		written += len(rows)
		return nil
	}
	rows := make([]vmstorage.MetricRow, n)
	refs := make([]uint64, n)
	for i := range rows {
		raw, err := marshalRawName(nil, labels.FromStrings("__name__", "vllm:metric_"+strconv.Itoa(i%1000), "instance", strconv.Itoa(i/1000)))
		require.NoError(b, err)
		rows[i] = vmstorage.MetricRow{MetricNameRaw: raw, Value: 1}
		refs[i] = uint64(i+1) * 0x9e3779b97f4a7c15 &^ collisionRefBit
	}
	ts := int64(0)
	minute := func() {
		for range perMinute {
			ts += 5000
			for i := range rows {
				rows[i].Timestamp = ts
			}
			h.add(rows, refs, nil, nil)
		}
		require.NoError(b, h.flush(func() {}, true))
	}
	minute() // the series exist, their buffers grown
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		written = 0
		minute()
		if written != n*perMinute {
			b.Fatalf("wrote %d rows, want %d", written, n*perMinute)
		}
	}
}
