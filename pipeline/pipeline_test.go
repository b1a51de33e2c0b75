package pipeline

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/explain"
	"github.com/aiserve/appliance/slo"
)

// An item every 15 s for 10 minutes through three segments, from two
// cameras: upload 0.2 s, inference 0.5 s then 2 s from minute 5, sync
// held in a gauge at 0.3 s; the upload moves 1000 bytes an item and
// retries every tenth.
const scene = `
load 15s
  up_seconds_sum{device="cam1"}      0+0.2x40
  up_seconds_count{device="cam1"}    0+1x40
  up_seconds_bucket{device="cam1",le="0.25"} 0+1x40
  up_seconds_bucket{device="cam1",le="+Inf"} 0+1x40
  up_seconds_sum{device="other"}      0+100x40
  up_seconds_count{device="other"}    0+1x40
  inf_seconds_sum{device="cam1"}     0+0.5x19 10+2x20
  inf_seconds_count{device="cam1"}   0+1x40
  inf_seconds_bucket{device="cam1",le="1"}    0+1x19 20x20
  inf_seconds_bucket{device="cam1",le="2.5"}  0+1x40
  inf_seconds_bucket{device="cam1",le="+Inf"} 0+1x40
  sync_seconds{device="cam1"}        0.3x40
  up_bytes_total{device="cam1"}      0+1000x40
  up_retries_total{device="cam1"}    0+0.1x40
`

func TestReadNamesTheSlowest(t *testing.T) {
	st := promqltest.LoadedStorage(t, scene)
	t.Cleanup(func() { st.Close() })
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	q := slo.EngineSource{Engine: eng, Queryable: st}

	cfg, err := config.Load([]byte(`
pipelines:
  - name: cams
    segments:
      - {name: upload, histogram: up_seconds, selector: '{device=~"cam.*"}', transfer: {bytes: up_bytes_total, retries: up_retries_total}}
      - {name: inference, histogram: inf_seconds, selector: '{device="cam1"}'}
      - {name: sync, duration: sync_seconds}
      - {name: archive, histogram: archive_seconds}
`), "")
	require.NoError(t, err)
	ps := FromConfig(cfg.Pipelines)
	require.Len(t, ps, 1)
	r, err := Read(context.Background(), q, ps[0], explain.BreakdownOptions{From: time.Unix(0, 0), To: time.Unix(600, 0), Step: time.Minute})
	require.NoError(t, err)
	require.Len(t, r.Segments, 4)

	// Over the whole range: upload 0.2 s and sync 0.3 s exactly; the
	// inference between 0.5 s and 2 s (rate's extrapolation of _sum and
	// _count differs when their ratio changes within the window).
	up, sync := 0.2, 0.3
	got := map[string]float64{}
	for _, s := range r.Segments {
		got[s.Name] = float64(s.RangeMean)
	}
	require.InDelta(t, up, got["upload"], 1e-9)
	require.InDelta(t, sync, got["sync"], 1e-9)
	infMean := got["inference"]
	require.Greater(t, infMean, 1.0)
	require.Less(t, infMean, 2.0)
	total := up + infMean + sync
	require.InDelta(t, total, float64(r.TotalMean), 1e-9)
	require.Equal(t, "inference", r.Slowest)
	require.InDelta(t, infMean/total, float64(r.SlowestShare), 1e-9)
	require.InDelta(t, up/total, float64(r.Segments[0].Share), 1e-9)
	require.Contains(t, r.Summary, "inference is the slowest segment")

	// The archive has no data: it is missing, without a share.
	require.Equal(t, []string{"archive: no samples of archive_seconds{} in the range"}, r.Missing)
	b, err := json.Marshal(r.Segments[3])
	require.NoError(t, err)
	require.Contains(t, string(b), `"share":null`)

	// The transfer figures: the increases over the range.
	tr := r.Segments[0].Transfer
	require.NotNil(t, tr)
	require.Equal(t, []string{"bytes", "retries"}, tr.Configured)
	require.InDelta(t, 40000, float64(tr.Bytes), 1e-6)
	require.InDelta(t, 4, float64(tr.Retries), 1e-9)
	require.True(t, tr.Failures != tr.Failures, "failures not configured: NaN")
	require.Nil(t, r.Segments[1].Transfer)

	// Means over time: the inference's rises from 0.5 s to 2 s.
	ser := r.Segments[1].Mean
	require.NotEmpty(t, ser)
	require.InDelta(t, 0.5, float64(ser[2][1]), 1e-9)
	require.InDelta(t, 2, float64(ser[len(ser)-1][1]), 1e-9)
	require.InDelta(t, 0.95*2.5+0, float64(r.Segments[1].P95[len(ser)-1][1]), 1.5, "P95 in the 1..2.5 bucket")
}
