package storage

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	promstorage "github.com/prometheus/prometheus/storage"
)

// BenchmarkAppend appends what a scrape loop does: one op is one scrape of
// 10k series (100 families of 100 series) through AppenderV2, passing back
// the refs of the previous scrape and the metadata with every sample, then
// Commit. ns/sample is the figure to compare with Prometheus' head appender
// and VictoriaMetrics' own ingestion.
func BenchmarkAppend(b *testing.B) { benchmarkAppend(b, 0) }

// BenchmarkAppendSeriesGuard is BenchmarkAppend without and with the
// storage.max_series guard (below its limit: every sample is looked up),
// side by side in one run.
func BenchmarkAppendSeriesGuard(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchmarkAppend(b, 0) })
	b.Run("max_series=1e6", func(b *testing.B) { benchmarkAppend(b, 1_000_000) })
}

func benchmarkAppend(b *testing.B, maxSeries int) {
	const families, perFamily = 100, 100
	opts := DefaultOptions()
	opts.Path = b.TempDir()
	opts.MaxSeries = maxSeries
	db, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	lsets, fams := nodeSeries(families, perFamily)
	meta := metadata.Metadata{Type: model.MetricTypeCounter, Help: "A benchmark counter."}
	refs := make([]promstorage.SeriesRef, len(lsets))
	// Scrapes one second apart from six days ago, inside retention for any b.N
	// a benchmark reaches.
	start := time.Now().Add(-6 * 24 * time.Hour).UnixMilli()

	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		appendScrape(b, context.Background(), db, lsets, fams, refs, meta, start+int64(n)*1000, n, 0)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lsets)), "ns/sample")
}

// nodeSeries are the append benchmarks' series: families counters of
// perFamily node_exporter-like series each, and each series' family.
func nodeSeries(families, perFamily int) (lsets []labels.Labels, fams []string) {
	lsets = make([]labels.Labels, 0, families*perFamily)
	fams = make([]string, 0, families*perFamily)
	for f := range families {
		name := "bench_metric_" + strconv.Itoa(f) + "_total"
		for i := range perFamily {
			lsets = append(lsets, labels.FromStrings(
				"__name__", name, "instance", "10.0.0."+strconv.Itoa(i%50)+":9100", "job", "node",
				"cpu", strconv.Itoa(i), "mode", "user"))
			fams = append(fams, name)
		}
	}
	return lsets, fams
}

// appendScrape appends one sample of each series in lsets at ts, as a
// scrape does (one appender on ctx, the refs of the previous scrape, the
// family's metadata), and commits. Series i of the scrape, the first of
// which is series first of the benchmark, gets the value n*(first+i).
func appendScrape(b *testing.B, ctx context.Context, db *DB, lsets []labels.Labels, fams []string, refs []promstorage.SeriesRef, meta metadata.Metadata, ts int64, n, first int) {
	app := db.AppenderV2(ctx)
	for i, ls := range lsets {
		ref, err := app.Append(refs[i], ls, 0, ts, float64(n*(first+i)), nil, nil,
			promstorage.AOptions{MetricFamilyName: fams[i], Metadata: meta})
		if err != nil {
			b.Fatal(err)
		}
		refs[i] = ref
	}
	if err := app.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSelect reads 100 series of 1h at 15s resolution.
func BenchmarkSelect(b *testing.B) {
	db := openTestDB(b, b.TempDir(), nil)
	start := time.Now().Add(-2 * time.Hour).UnixMilli()
	for s := range 240 {
		app := db.AppenderV2(context.Background())
		for i := range 100 {
			ls := labels.FromStrings("__name__", "sel", "i", strconv.Itoa(i))
			if _, err := app.Append(0, ls, 0, start+int64(s)*15000, float64(s+i), nil, nil, promstorage.AOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	db.Flush()
	m := labels.MustNewMatcher(labels.MatchEqual, "__name__", "sel")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		q, err := db.Querier(start, start+time.Hour.Milliseconds())
		if err != nil {
			b.Fatal(err)
		}
		ss := q.Select(context.Background(), true, nil, m)
		n := 0
		for ss.Next() {
			n++
		}
		if ss.Err() != nil || n != 100 {
			b.Fatal(ss.Err(), n)
		}
	}
}

// BenchmarkSelectLarge reads 2,000 series of 6h at 15s (2.9M samples), the
// shape of a dashboard query over a fleet.
func BenchmarkSelectLarge(b *testing.B) {
	db := openTestDB(b, b.TempDir(), nil)
	start := time.Now().Add(-7 * time.Hour).UnixMilli()
	const nSeries, nSamples = 2000, 1440
	lsets := make([]labels.Labels, nSeries)
	for i := range lsets {
		lsets[i] = labels.FromStrings("__name__", "big", "le", strconv.Itoa(i%22), "instance", strconv.Itoa(i/22))
	}
	for chunk := 0; chunk < nSamples; chunk += 120 {
		app := db.AppenderV2(context.Background())
		for i, ls := range lsets {
			for s := chunk; s < chunk+120; s++ {
				if _, err := app.Append(0, ls, 0, start+int64(s)*15000, float64(s*i), nil, nil, promstorage.AOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	db.Flush()
	m := labels.MustNewMatcher(labels.MatchEqual, "__name__", "big")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		q, err := db.Querier(start, start+nSamples*15000)
		if err != nil {
			b.Fatal(err)
		}
		ss := q.Select(context.Background(), true, nil, m)
		n := 0
		for ss.Next() {
			n++
		}
		if err := ss.Err(); err != nil || n != nSeries {
			b.Fatalf("got %d series, err %v", n, err)
		}
		q.Close()
	}
}

// BenchmarkAppendFlush is BenchmarkAppend with the head's flush in the
// loop, as the appliance runs: one op is three scrapes of 10k series and a
// Flush (the downsampler's, every 15 s at a 5 s scrape interval). With
// batch=on (Options.HeadBatchWrites) the flush, not Commit, calls AddRows,
// three samples per series in a row.
func BenchmarkAppendFlush(b *testing.B) {
	for _, batch := range []bool{false, true} {
		name := "batch=off"
		if batch {
			name = "batch=on"
		}
		b.Run(name, func(b *testing.B) {
			opts := DefaultOptions()
			opts.Path = b.TempDir()
			opts.HeadBatchWrites = batch
			db, err := Open(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			benchAppendFlush(b, db)
		})
	}
}

func benchAppendFlush(b *testing.B, db *DB) {
	const families, perFamily, scrapes = 100, 100, 3
	lsets, _ := nodeSeries(families, perFamily)
	refs := make([]promstorage.SeriesRef, len(lsets))
	start := time.Now().Add(-6 * 24 * time.Hour).UnixMilli()
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		for k := range scrapes {
			ts := start + int64(n*scrapes+k)*1000
			app := db.AppenderV2(context.Background())
			for i, ls := range lsets {
				ref, err := app.Append(refs[i], ls, 0, ts, float64(n*i+k), nil, nil, promstorage.AOptions{})
				if err != nil {
					b.Fatal(err)
				}
				refs[i] = ref
			}
			if err := app.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		db.Flush()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*scrapes*len(lsets)), "ns/sample")
}
