package downsample

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/storage"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// BenchmarkQuery30Days times the two queries over 30 days of the
// accuracy fixture's series scraped every 15s (about 5M samples), at a
// step that gives about 500 points, once from raw (max_source_resolution=
// raw) and once with the tier the appliance picks (5m at this step). It
// is the in-process half of the tier benchmark: no anchors, same data,
// same engine, so the ratio is what the tiers buy.
//
//	go test ./downsample/ -run '^$' -bench Query30Days -benchtime 10x
func BenchmarkQuery30Days(b *testing.B) {
	fx := loadFixture(b, "testdata/accuracy.test")
	fx.interval = 15 * time.Second
	now := time.Now()
	t0 := now.Add(-fx.length - time.Hour).Truncate(time.Hour)
	dir := b.TempDir()
	opts := storage.DefaultOptions()
	opts.Path = dir
	opts.RetentionRaw = 40 * 24 * time.Hour
	opts.Retention1m = 60 * 24 * time.Hour
	db, err := storage.Open(opts)
	require.NoError(b, err)
	defer db.Close()
	app := db.AppenderV2(context.Background())
	n := 0
	for i, g := range fx.gens {
		g.emit(b, t0, fx.interval, fx.length, uint64(i+1), func(ls labels.Labels, ts int64, v float64) {
			_, err := app.Append(0, ls, 0, ts, v, nil, nil, promstorage.AOptions{})
			require.NoError(b, err)
			if n++; n%100_000 == 0 {
				require.NoError(b, app.Commit())
				app = db.AppenderV2(context.Background())
			}
		})
	}
	require.NoError(b, app.Commit())
	db.Flush()
	ds, err := New(db, Options{Now: func() time.Time { return now }, Span1m: time.Hour, Span5m: 6 * time.Hour})
	require.NoError(b, err)
	defer ds.Close()
	require.NoError(b, ds.Step(context.Background()))
	b.Logf("%d raw samples", n)

	eng := query.New(query.Options{}, nil, nil)
	step := fx.length / 500
	for _, q := range []struct{ name, expr string }{
		{"p95", `histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))`},
		{"max", `max_over_time(vllm:num_requests_waiting[1h])`},
	} {
		for _, tier := range []storage.Tier{storage.TierRaw, storage.Tier5m} {
			b.Run(q.name+"/"+tier.String(), func(b *testing.B) {
				b.ReportAllocs()
				ctx := storage.WithMaxSourceResolution(context.Background(), tier)
				for b.Loop() {
					qry, err := eng.NewRangeQuery(ctx, db, nil, q.expr, t0, t0.Add(fx.length), step)
					require.NoError(b, err)
					res := qry.Exec(ctx)
					require.NoError(b, res.Err)
					qry.Close()
				}
			})
		}
	}

	require.NoError(b, ds.Step(context.Background()))
	ds.Close()
	require.NoError(b, db.Close())
	for _, tier := range storage.Tiers {
		var size int64
		_ = filepath.WalkDir(filepath.Join(dir, "tsdb", tier.String()), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					size += fi.Size()
				}
			}
			return nil
		})
		b.Logf("tier %s: %d bytes on disk", tier, size)
	}
}
