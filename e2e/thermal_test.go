package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// thermalReport is what the test reads of /api/v1/appliance/thermal.
type thermalReport struct {
	Step         float64
	Temperatures []struct {
		Name, Source string
		Max          float64
		Points       [][2]float64
	}
	Thresholds []struct{ Value float64 }
	Throttle   []struct {
		From, To       float64
		Source, Reason string
	}
	Latency *struct {
		Name   string
		Points [][2]float64
	}
	Frames *struct {
		Metric       string
		Rate, Jitter struct{ Points [][2]float64 }
		P50, P99     struct{ Points [][2]float64 }
	}
	Missing []string
}

// TestHardwareThermalOverlay runs the appliance's own readings on a fake
// Raspberry Pi: a sysfs tree whose cpu-thermal zone the test heats, and a
// vcgencmd (collectors.vcgencmd) whose get_throttled the test flips to
// the soft temperature limit and back. A detector pushes its per-frame
// histogram. The thermal API and /hardware show the temperature with the
// 80 °C threshold, the throttle span, the detector's P95 and its frame
// rate and jitter (P99 − P50, checked against histogram_quantile).
func TestHardwareThermalOverlay(t *testing.T) {
	dir := t.TempDir()
	zone := filepath.Join(dir, "sys", "class", "thermal", "thermal_zone0")
	require.NoError(t, os.MkdirAll(zone, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(zone, "type"), []byte("cpu-thermal\n"), 0o644))
	setTemp := func(milli int) {
		require.NoError(t, os.WriteFile(filepath.Join(zone, "temp"), []byte(strconv.Itoa(milli)+"\n"), 0o644))
	}
	flags := filepath.Join(dir, "throttled")
	setFlags := func(v string) { require.NoError(t, os.WriteFile(flags, []byte("throttled="+v+"\n"), 0o644)) }
	setTemp(71000)
	setFlags("0x0")
	vcgencmd := filepath.Join(dir, "vcgencmd")
	require.NoError(t, os.WriteFile(vcgencmd, []byte("#!/bin/sh\n[ \"$1\" = get_throttled ] || exit 2\ncat "+flags+"\n"), 0o755))
	cfg := fmt.Sprintf(`
global: {scrape_interval: 1s}
scrape_configs: []
collectors: {enabled: true, host: false, gpu: false, thermal: true, interval: 1s, sys_path: %q, vcgencmd: %q}
`, filepath.Join(dir, "sys"), vcgencmd)
	p := start(t, writeConfig(t, dir, cfg), filepath.Join(dir, "data"))
	begin := time.Now().Truncate(time.Second)

	// A detector: 10 frames a second over the last 3 minutes, 40 ms
	// each, every tenth 400 ms.
	var b strings.Builder
	for i := 0; i <= 180; i++ {
		ms := begin.Add(time.Duration(i-180) * time.Second).UnixMilli()
		n := float64(10 * i)
		fmt.Fprintf(&b, "detector_frame_seconds_bucket{device=\"pi\",le=\"0.05\"} %g %d\n", 0.9*n, ms)
		fmt.Fprintf(&b, "detector_frame_seconds_bucket{device=\"pi\",le=\"0.5\"} %g %d\n", n, ms)
		fmt.Fprintf(&b, "detector_frame_seconds_bucket{device=\"pi\",le=\"+Inf\"} %g %d\n", n, ms)
		fmt.Fprintf(&b, "detector_frame_seconds_count{device=\"pi\"} %g %d\n", n, ms)
		fmt.Fprintf(&b, "detector_frame_seconds_sum{device=\"pi\"} %g %d\n", n*(0.9*0.04+0.1*0.4), ms)
	}
	code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
	require.Equal(t, http.StatusNoContent, code, body)

	onFor := func(expr string, n int) func() bool {
		return func() bool {
			v := p.instant(fmt.Sprintf("sum_over_time((%s)[20s:1s])", expr), time.Now())
			return len(v) == 1 && value(t, v[0]) >= float64(n)
		}
	}
	eventually(t, 60*time.Second, "the cpu-thermal zone read", func() bool {
		return len(p.instant(`node_thermal_zone_temp{type="cpu-thermal"}`, time.Now())) == 1
	})
	// Heat it: the firmware's soft temperature limit now (bit 3) and
	// since boot (bit 19), for a few readings; then cool down.
	setTemp(84500)
	setFlags("0x80008")
	eventually(t, 60*time.Second, "the soft temperature limit read 3 times", onFor(`appliance_throttled{flag="soft_temp_limit"} == 1`, 3))
	setTemp(72000)
	setFlags("0x80000")
	eventually(t, 60*time.Second, "the limit off again for 3 readings", onFor(`appliance_throttled{flag="soft_temp_limit"} == bool 0`, 3))
	end := time.Now().Truncate(time.Second)
	from := begin.Add(-2 * time.Minute)

	code, r := p.get("/api/v1/appliance/thermal", url.Values{"from": {strconv.FormatInt(from.Unix(), 10)}, "to": {strconv.FormatInt(end.Unix(), 10)}, "step": {"1"}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var rep thermalReport
	require.NoError(t, json.Unmarshal(r.Data, &rep))
	require.Len(t, rep.Temperatures, 1, "%+v", rep)
	require.Equal(t, "cpu-thermal", rep.Temperatures[0].Name)
	require.Equal(t, 84.5, rep.Temperatures[0].Max)
	require.Len(t, rep.Thresholds, 1)
	require.Equal(t, 80.0, rep.Thresholds[0].Value)
	require.Len(t, rep.Throttle, 1, "one throttle span: %+v", rep.Throttle)
	span := rep.Throttle[0]
	require.Equal(t, "vcgencmd", span.Source)
	require.Equal(t, "soft_temp_limit", span.Reason)
	require.GreaterOrEqual(t, span.To-span.From, 3.0)
	// The span is when the zone read hot.
	for _, pt := range rep.Temperatures[0].Points {
		if pt[0] >= span.From+1 && pt[0] < span.To-1 {
			require.Equal(t, 84.5, pt[1], "hot while throttled at %v", pt[0])
		}
	}
	require.NotNil(t, rep.Latency)
	require.Equal(t, "detector_frame_seconds P95", rep.Latency.Name)
	require.NotNil(t, rep.Frames)
	require.Equal(t, "detector_frame_seconds", rep.Frames.Metric)
	// The jitter is P99 − P50 of the frames (histogram_quantile over the
	// points' one-minute window), and the rate 10 frames a second.
	var last [2]float64
	for _, pt := range rep.Frames.Jitter.Points {
		if pt[0] <= float64(begin.Unix()) {
			last = pt
		}
	}
	require.NotZero(t, last[0])
	at := time.Unix(int64(last[0]), 0)
	q := func(expr string) float64 {
		v := p.instant(expr, at)
		require.Len(t, v, 1, expr)
		return value(t, v[0])
	}
	bk := `sum by (le) (rate(detector_frame_seconds_bucket[60s]))`
	want := q("histogram_quantile(0.99, "+bk+")") - q("histogram_quantile(0.5, "+bk+")")
	require.InDelta(t, want, last[1], 1e-9, "jitter at %s", at)
	require.Greater(t, want, 0.3, "the slow tenth of the frames spreads P99 from P50")
	for _, pt := range rep.Frames.Rate.Points {
		if pt[0] > float64(begin.Add(-2*time.Minute).Unix()) && pt[0] <= float64(begin.Unix()) {
			require.InDelta(t, 10, pt[1], 1e-9, "frames/s at %v", pt[0])
		}
	}

	// The page.
	chrome := chromiumPath(t)
	base := "http://" + p.addr
	requireBundle(t, base)
	ctx, br := openBrowser(t, chrome)
	page := base + "/hardware?" + url.Values{"from": {strconv.FormatInt(from.UnixMilli(), 10)}, "to": {strconv.FormatInt(end.UnixMilli(), 10)}}.Encode()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`))), "open /hardware")
	byID := pagePanels(t, ctx)
	ov := byID["temp_latency"]
	require.Equal(t, "ready", ov.State, "%+v", byID)
	require.Equal(t, "2", ov.Series, "the temperature and the P95 on one chart")
	var got struct{ Thresholds, Spans, Latency, Note string }
	evalJSON(t, ctx, `(() => { const e = document.querySelector('[data-panel="temp_latency"]');
		return {thresholds: e.dataset.thresholds, spans: e.dataset.throttleSpans, latency: e.dataset.latency,
			note: document.querySelector('[data-testid="thermal-note"]').innerText}; })()`, &got)
	require.Equal(t, "80", got.Thresholds)
	require.Equal(t, "1", got.Spans)
	require.Equal(t, "detector_frame_seconds P95", got.Latency)
	require.Contains(t, got.Note, "throttles at 80 °C")
	require.Contains(t, got.Note, "soft_temp_limit (vcgencmd)")
	// The chart draws its axes after the panel is ready (the chart
	// library lays out on the next frame): wait for the third one.
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`[data-panel="temp_latency"] .u-axis:nth-of-type(3)`))), "the chart's axes")
	var axes int
	evalJSON(t, ctx, `document.querySelectorAll('[data-panel="temp_latency"] .u-axis').length`, &axes)
	require.Equal(t, 3, axes, "time, °C and seconds")
	for _, id := range []string{"frame_rate", "frame_jitter"} {
		require.Equal(t, "ready", byID[id].State, "%s: %+v", id, byID[id])
	}
	require.Equal(t, "1", byID["frame_rate"].Series)
	require.Equal(t, "3", byID["frame_jitter"].Series)
	checkBrowserClean(t, br, base)
	screenshot(t, ctx, "hardware-thermal.png")
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}
