package storage

import (
	"bytes"
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

// BenchmarkAppendWAL is BenchmarkAppend (one op: a scrape of 10k series,
// then Commit) with the write-ahead log off, on (what scrapes and rules
// run with: written, not fsynced) and on with an fsync per commit (what
// the HTTP ingest runs with); and the same for a remote-write-sized
// commit of 2,000 samples. The difference is the WAL's cost per sample.
func BenchmarkAppendWAL(b *testing.B) {
	for _, perCommit := range []int{10_000, 2_000} {
		for _, mode := range []struct {
			name      string
			noWAL     bool
			syncEvery bool
		}{{"wal=off", true, false}, {"wal=on", false, false}, {"wal=fsync", false, true}} {
			b.Run("samples="+strconv.Itoa(perCommit)+"/"+mode.name, func(b *testing.B) {
				opts := DefaultOptions()
				opts.Path = b.TempDir()
				opts.DisableWAL = mode.noWAL
				db, err := Open(opts)
				require.NoError(b, err)
				defer db.Close()
				ctx := context.Background()
				if mode.syncEvery {
					ctx = WithSyncCommit(ctx)
				}
				benchAppendCommits(b, db, ctx, perCommit)
			})
		}
	}
}

func benchAppendCommits(b *testing.B, db *DB, ctx context.Context, n int) {
	const perFamily = 100
	lsets, fams := nodeSeries(n/perFamily, perFamily)
	meta := metadata.Metadata{Type: model.MetricTypeCounter, Help: "A benchmark counter."}
	refs := make([]promstorage.SeriesRef, len(lsets))
	start := time.Now().Add(-6 * 24 * time.Hour).UnixMilli()
	b.ReportAllocs()
	b.ResetTimer()
	for k := range b.N {
		appendScrape(b, ctx, db, lsets, fams, refs, meta, start+int64(k)*1000, k, 0)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lsets)), "ns/sample")
}

// BenchmarkWALLog is the log's own cost per commit, VictoriaMetrics left
// out: encoding the records of a commit whose series are named already
// (the steady state) and writing them, with and without an fsync. One op
// is one commit of n samples.
func BenchmarkWALLog(b *testing.B) {
	for _, n := range []int{10_000, 2_000} {
		for _, fsync := range []bool{false, true} {
			b.Run("samples="+strconv.Itoa(n)+"/fsync="+strconv.FormatBool(fsync), func(b *testing.B) {
				l, err := openWAL(b.TempDir(), nil, nil)
				require.NoError(b, err)
				require.NoError(b, l.startAfterReplay())
				defer l.close(true)
				var rows []vmstorage.MetricRow
				var ents []*seriesEntry
				var scratch []byte
				for i := range n {
					ls := labels.FromStrings("__name__", "bench_metric_"+strconv.Itoa(i/100)+"_total",
						"instance", "10.0.0."+strconv.Itoa(i%50)+":9100", "job", "node", "cpu", strconv.Itoa(i%100), "mode", "user")
					scratch, err = marshalRawName(scratch[:0], ls)
					require.NoError(b, err)
					rows = append(rows, vmstorage.MetricRow{MetricNameRaw: bytes.Clone(scratch)})
					ents = append(ents, &seriesEntry{raw: rows[i].MetricNameRaw})
				}
				start := time.Now().UnixMilli()
				b.ReportAllocs()
				b.ResetTimer()
				for k := range b.N {
					for i := range rows {
						rows[i].Timestamp, rows[i].Value = start+int64(k)*1000, float64(k*i)
					}
					seq, err := l.log(rows, ents)
					if err != nil {
						b.Fatal(err)
					}
					if fsync {
						if err := l.sync(seq); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
				b.ReportMetric(float64(l.size())/float64(b.N*n), "B/sample")
			})
		}
	}
}
