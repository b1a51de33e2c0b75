package slo

import (
	"context"
	"testing"
	"time"

	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/downsample"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/storage/storagetest"
)

// TestReportFromTieredStorage writes 15 days of known data through the
// appliance's storage (the older half goes straight to the 1m and 5m
// tiers, as an import of old data does) and checks the report of the
// last complete week in Asia/Shanghai within 1%: this week's P95 on the
// bucket bound 1.0 and attainment 99.2%, last week's (from the 1m tier)
// P95 1.5 and 95%, across a counter reset, with n < 100 for a small model.
func TestReportFromTieredStorage(t *testing.T) {
	loc := shanghai(t)
	now := time.Now()
	w := WeekOf(now, loc).Prev()
	end := w.End(loc)
	from := end.Add(-15 * 24 * time.Hour)

	db := storagetest.Open(t)

	samples := genReportData(w, loc, from, end)
	// Commit a day at a time, whole 5-minute windows each, as the text
	// importer batches time-ordered input.
	for i := 0; i < len(samples); {
		day := samples[i].t.Truncate(24 * time.Hour)
		app := db.AppenderV2(context.Background())
		for ; i < len(samples) && samples[i].t.Truncate(24*time.Hour).Equal(day); i++ {
			_, err := app.Append(0, samples[i].lset, 0, samples[i].t.UnixMilli(), samples[i].v, nil, nil, promstorage.AOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, app.Commit())
	}
	// One pass of the downsampler, as the running appliance makes every
	// 15 s: it rolls the raw tier up and sets the tiers' watermarks, up
	// to which the querier reads them.
	ds, err := downsample.New(db, downsample.Options{Span1m: 24 * time.Hour, Span5m: 24 * time.Hour})
	require.NoError(t, err)
	t.Cleanup(ds.Close)
	require.NoError(t, ds.Step(context.Background()))

	src := EngineSource{Engine: query.New(query.Options{}, nil, nil), Queryable: db}
	r, err := Compute(context.Background(), src, w, ReportOptions{SLOs: reportSLOs(t), Location: loc, Now: now,
		Releases: ReleaseFunc(func(context.Context, time.Time, time.Time) ([]ReleaseMark, error) { return testReleases(w, loc), nil })})
	require.NoError(t, err)
	require.Contains(t, r.Tiers, "1m", "last week is older than the raw tier keeps")
	checkKnownAnswers(t, r)
}
