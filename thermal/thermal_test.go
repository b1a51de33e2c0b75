package thermal

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/slo"
)

// A Raspberry Pi running a detector, a frame every second for 10
// minutes: the cpu-thermal zone climbs from 60 °C to 84 °C, the
// firmware throttles from minute 6 to minute 8, and the frames, 0.1 s
// each before, spread to 0.1–0.9 s while throttled.
const piScene = `
load 1m
  node_thermal_zone_temp{instance="pi",zone="0",type="cpu-thermal"} 60+3x8 84 80
  appliance_throttled{instance="pi",flag="soft_temp_limit"} 0x5 1 1 0 0 0
  appliance_throttled{instance="pi",flag="under_voltage"}   1x10
  frame_seconds_bucket{le="0.2"}  0+60x5 360+30x5
  frame_seconds_bucket{le="1"}    0+60x10
  frame_seconds_bucket{le="+Inf"} 0+60x10
  frame_seconds_sum   0+6x5 30+30x5
  frame_seconds_count 0+60x10
`

func TestOverlayOnAPi(t *testing.T) {
	st := promqltest.LoadedStorage(t, piScene)
	t.Cleanup(func() { st.Close() })
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	q := slo.EngineSource{Engine: eng, Queryable: st}
	p95 := "histogram_quantile(0.95, sum by (le) (rate(frame_seconds_bucket[$__window])))"
	r, err := Overlay(context.Background(), q, Spec{Latency: &Latency{Name: "detector P95", P95: p95}, Frames: &Frames{Metric: "frame_seconds"}},
		Options{From: time.Unix(0, 0), To: time.Unix(600, 0), Step: time.Minute, Rate: 2 * time.Minute})
	require.NoError(t, err)

	require.Len(t, r.Temperatures, 1)
	require.Equal(t, "cpu-thermal", r.Temperatures[0].Name)
	require.Equal(t, "thermal_zone", r.Temperatures[0].Source)
	require.InDelta(t, 84, float64(r.Temperatures[0].Max), 1e-9)
	require.Equal(t, []Threshold{{80, "cpu-thermal (Raspberry Pi) throttles at 80 °C"}}, r.Thresholds)

	// Under-voltage is no throttle span; the soft temperature limit is,
	// from minute 6 to minute 8.
	require.Equal(t, []Span{{From: 360, To: 480, Source: "vcgencmd", Reason: "soft_temp_limit"}}, r.Throttle)

	require.NotNil(t, r.Latency)
	require.Equal(t, "detector P95", r.Latency.Name)
	require.Len(t, r.Latency.Points, 10, "no rate at 0")
	require.InDelta(t, 0.19, float64(r.Latency.Points[3][1]), 1e-9, "before: all frames under 0.2 s")
	require.Greater(t, float64(r.Latency.Points[8][1]), 0.5, "throttled: half the frames above 0.2 s")

	require.NotNil(t, r.Frames)
	require.InDelta(t, 1, float64(r.Frames.Rate.Points[4][1]), 1e-9, "a frame a second")
	// Jitter is P99 − P50 point by point.
	for i, pt := range r.Frames.Jitter.Points {
		require.InDelta(t, float64(r.Frames.P99.Points[i][1]-r.Frames.P50.Points[i][1]), float64(pt[1]), 1e-9)
	}
	require.Greater(t, float64(r.Frames.Jitter.Points[8][1]), 4*float64(r.Frames.Jitter.Points[3][1]), "the jitter grows while throttled")
	require.Empty(t, r.Missing)
}

func TestOverlayWithoutReadings(t *testing.T) {
	st := promqltest.LoadedStorage(t, "load 1m\n  up 1x10\n")
	t.Cleanup(func() { st.Close() })
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	r, err := Overlay(context.Background(), slo.EngineSource{Engine: eng, Queryable: st}, Spec{}, Options{From: time.Unix(0, 0), To: time.Unix(600, 0)})
	require.NoError(t, err)
	require.Empty(t, r.Temperatures)
	require.Empty(t, r.Throttle)
	require.Nil(t, r.Latency)
	require.Nil(t, r.Frames)
	require.Len(t, r.Missing, 2)
}

// TestOverlayDCGMBitmask: the DCGM exporter's clock-reasons bitmask
// (0x40, hardware thermal slowdown, from minute 3 to 5; 0x1, idle, is no
// throttle) gives a span, with the GPU's temperature and its 85 °C line.
func TestOverlayDCGMBitmask(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 1m
  DCGM_FI_DEV_GPU_TEMP{instance="dcgm:9400",gpu="0"} 70+3x10
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS{instance="dcgm:9400",gpu="0"} 1 1 1 64 65 1 1 1 1 1 1
`)
	t.Cleanup(func() { st.Close() })
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	r, err := Overlay(context.Background(), slo.EngineSource{Engine: eng, Queryable: st}, Spec{}, Options{From: time.Unix(0, 0), To: time.Unix(600, 0), Step: time.Minute})
	require.NoError(t, err)
	require.Len(t, r.Temperatures, 1)
	require.Equal(t, "GPU 0", r.Temperatures[0].Name)
	require.Equal(t, []Threshold{{85, "GPU: 85 °C, near where data-centre GPUs slow down"}}, r.Thresholds)
	require.Equal(t, []Span{{From: 180, To: 300, Source: "dcgm", Reason: "thermal_slowdown"}}, r.Throttle)
}

// TestOverlayOwnReadingsOverBitmask: where the appliance's own GPU
// readings name the reasons, the bitmask they also write adds no span.
func TestOverlayOwnReadingsOverBitmask(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 1m
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu="0"} 1 1 1 64 64 1 1 1 1 1 1
  nvidia_smi_clocks_event_reason_active{gpu="0",reason="hw_thermal_slowdown"} 0 0 0 1 1 0 0 0 0 0 0
  nvidia_smi_clocks_event_reason_active{gpu="0",reason="gpu_idle"} 1 1 1 0 0 1 1 1 1 1 1
`)
	t.Cleanup(func() { st.Close() })
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	r, err := Overlay(context.Background(), slo.EngineSource{Engine: eng, Queryable: st}, Spec{}, Options{From: time.Unix(0, 0), To: time.Unix(600, 0), Step: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []Span{{From: 180, To: 300, Source: "nvidia-smi", Reason: "hw_thermal_slowdown"}}, r.Throttle)
}
