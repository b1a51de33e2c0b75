package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
)

// pipelineConfig is a camera → edge → cloud chain of three segments:
// the cameras' upload (a histogram, with transfer counters), the edge
// inference on one Jetson (a histogram) and the cloud sync (a gauge of
// seconds, pushed by remote write).
const pipelineConfig = `
scrape_configs: []
pipelines:
  - name: camera-to-cloud
    segments:
      - name: upload
        histogram: edge_upload_seconds
        selector: '{device=~"cam.*"}'
        transfer: {bytes: edge_upload_bytes_total, retries: edge_upload_retries_total, failures: edge_upload_failures_total}
      - name: inference
        histogram: edge_inference_seconds
        selector: '{device="jetson-1"}'
      - name: sync
        duration: cloud_sync_seconds
`

// pushed is what pushPipeline sent, for the expected figures.
type pushed struct {
	t0, tN                   time.Time
	upSum, upCount           float64
	infSum, infCount         float64
	syncValues               []float64
	bytes, retries, failures float64
}

// pushPipeline pushes 20 rounds 15 s apart, the last at end: two
// cameras upload an item a round each (0.15 s and 0.25 s), jetson-1
// infers it in 0.3 s until round 10 and in 1.6 s from then on (made
// slow), jetson-2 (not in the selector) takes 9 s, and the cloud sync
// gauge reads about 0.4 s. Every counter starts at 0 in round 0, so the
// rates over a range that holds all rounds are the plain increases.
func pushPipeline(t *testing.T, p *proc, end time.Time) pushed {
	t.Helper()
	const rounds = 20
	var w pushed
	w.t0, w.tN = end.Add(-(rounds-1)*15*time.Second), end
	var b strings.Builder
	rw := &prompb.WriteRequest{}
	sync := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "cloud_sync_seconds"}, {Name: "device", Value: "cloud"}}}
	cams := map[string]float64{"cam1": 0.15, "cam2": 0.25}
	var camSum = map[string]float64{}
	var jet1Sum, jet2Sum float64
	for i := 0; i < rounds; i++ {
		ms := w.t0.Add(time.Duration(i) * 15 * time.Second).UnixMilli()
		n := float64(i)
		for _, cam := range []string{"cam1", "cam2"} {
			if i > 0 {
				camSum[cam] += cams[cam]
			}
			fmt.Fprintf(&b, "edge_upload_seconds_sum{device=%q} %g %d\n", cam, camSum[cam], ms)
			fmt.Fprintf(&b, "edge_upload_seconds_count{device=%q} %g %d\n", cam, n, ms)
			fmt.Fprintf(&b, "edge_upload_seconds_bucket{device=%q,le=\"0.2\"} %g %d\n", cam, map[bool]float64{true: n, false: 0}[cam == "cam1"], ms)
			fmt.Fprintf(&b, "edge_upload_seconds_bucket{device=%q,le=\"+Inf\"} %g %d\n", cam, n, ms)
			fmt.Fprintf(&b, "edge_upload_bytes_total{device=%q} %g %d\n", cam, 250000*n, ms)
			fmt.Fprintf(&b, "edge_upload_retries_total{device=%q} %d %d\n", cam, i/4, ms)
			fmt.Fprintf(&b, "edge_upload_failures_total{device=%q} %d %d\n", cam, i/10, ms)
		}
		inf := 0.3
		if i >= 10 {
			inf = 1.6
		}
		if i > 0 {
			jet1Sum += inf
			jet2Sum += 9
		}
		slow := float64(max(0, i-9))
		fmt.Fprintf(&b, "edge_inference_seconds_sum{device=\"jetson-1\"} %g %d\n", jet1Sum, ms)
		fmt.Fprintf(&b, "edge_inference_seconds_count{device=\"jetson-1\"} %g %d\n", n, ms)
		fmt.Fprintf(&b, "edge_inference_seconds_bucket{device=\"jetson-1\",le=\"0.5\"} %g %d\n", n-slow, ms)
		fmt.Fprintf(&b, "edge_inference_seconds_bucket{device=\"jetson-1\",le=\"2\"} %g %d\n", n, ms)
		fmt.Fprintf(&b, "edge_inference_seconds_bucket{device=\"jetson-1\",le=\"+Inf\"} %g %d\n", n, ms)
		fmt.Fprintf(&b, "edge_inference_seconds_sum{device=\"jetson-2\"} %g %d\n", jet2Sum, ms)
		fmt.Fprintf(&b, "edge_inference_seconds_count{device=\"jetson-2\"} %g %d\n", n, ms)
		fmt.Fprintf(&b, "edge_inference_seconds_bucket{device=\"jetson-2\",le=\"+Inf\"} %g %d\n", n, ms)
		v := 0.38 + 0.02*float64(i%3)
		w.syncValues = append(w.syncValues, v)
		sync.Samples = append(sync.Samples, prompb.Sample{Timestamp: ms, Value: v})
	}
	rw.Timeseries = append(rw.Timeseries, sync)
	w.upSum, w.upCount = camSum["cam1"]+camSum["cam2"], 2*(rounds-1)
	w.infSum, w.infCount = jet1Sum, rounds-1
	w.bytes, w.retries, w.failures = 2*250000*(rounds-1), 2*float64((rounds-1)/4), 2*float64((rounds-1)/10)
	code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
	require.Equal(t, http.StatusNoContent, code, body)
	code, body = p.post("/api/v1/write", "application/x-protobuf", remoteWriteBody(t, rw), rwHeaders)
	require.Equal(t, http.StatusNoContent, code, body)
	return w
}

// pipelineReport is what the test reads of /api/v1/appliance/pipelines/<name>.
type pipelineReport struct {
	Slowest      string
	SlowestShare float64 `json:"slowest_share"`
	TotalMean    float64 `json:"total_mean"`
	Summary      string
	Note         string
	Segments     []struct {
		Name      string
		RangeMean float64 `json:"range_mean"`
		Share     float64
		Mean      [][2]float64
		P95       [][2]float64
		Transfer  *struct{ Bytes, Retries, Failures float64 }
	}
}

// TestPipelineSlowestSegment: a pipeline of three pushed segments (import
// and remote write, as devices behind NAT push) where the inference is
// made slow half-way; the API and the page name it the slowest, with its
// share of the chain's mean as computed from the pushed sums and counts.
func TestPipelineSlowestSegment(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, pipelineConfig), filepath.Join(dir, "data"))
	end := time.Now().Add(-time.Minute).Truncate(time.Second)
	w := pushPipeline(t, p, end)
	eventually(t, 30*time.Second, "the pushed samples searchable", func() bool {
		v := p.instant(`count(count_over_time({__name__=~"edge_inference_seconds_count|cloud_sync_seconds"}[10m]) == 20)`, end)
		return len(v) == 1 && value(t, v[0]) == 3
	})

	up, inf := w.upSum/w.upCount, w.infSum/w.infCount
	var sync float64
	for _, v := range w.syncValues {
		sync += v
	}
	sync /= float64(len(w.syncValues))
	total := up + inf + sync
	from := w.t0.Add(-30 * time.Second)

	code, r := p.get("/api/v1/appliance/pipelines/camera-to-cloud", url.Values{"from": {strconv.FormatInt(from.Unix(), 10)}, "to": {strconv.FormatInt(end.Unix(), 10)}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var rep pipelineReport
	require.NoError(t, json.Unmarshal(r.Data, &rep))
	require.Equal(t, "inference", rep.Slowest, rep.Summary)
	require.InDelta(t, inf/total, rep.SlowestShare, 1e-9, "the inference's share: %g of %g", inf, total)
	require.InDelta(t, total, rep.TotalMean, 1e-9)
	require.Len(t, rep.Segments, 3)
	for i, want := range []float64{up, inf, sync} {
		require.InDelta(t, want, rep.Segments[i].RangeMean, 1e-9, rep.Segments[i].Name)
		require.InDelta(t, want/total, rep.Segments[i].Share, 1e-9, rep.Segments[i].Name)
	}
	require.Contains(t, rep.Summary, fmt.Sprintf("(%.0f%%)", 100*inf/total))
	tr := rep.Segments[0].Transfer
	require.NotNil(t, tr)
	require.InDelta(t, w.bytes, tr.Bytes, 1e-6)
	require.InDelta(t, w.retries, tr.Retries, 1e-9)
	require.InDelta(t, w.failures, tr.Failures, 1e-9)
	code, _ = p.get("/api/v1/appliance/pipelines/nope", nil)
	require.Equal(t, http.StatusNotFound, code)

	// The page.
	chrome := chromiumPath(t)
	base := "http://" + p.addr
	requireBundle(t, base)
	ctx, b := openBrowser(t, chrome)
	page := base + "/pipeline/camera-to-cloud?" + url.Values{"from": {strconv.FormatInt(from.UnixMilli(), 10)}, "to": {strconv.FormatInt(end.UnixMilli(), 10)}}.Encode()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`))), "open the pipeline's page")
	byID := pagePanels(t, ctx)
	seg := byID["pipeline-segments"]
	require.Equal(t, "ready", seg.State, "%+v", byID)
	require.Equal(t, "3", seg.Series)
	for _, id := range []string{"pipeline-stack", "pipeline-p95", "pipeline-mean"} {
		require.Equal(t, "ready", byID[id].State, "%s: %+v", id, byID[id])
		require.Equal(t, "3", byID[id].Series, id)
	}
	var got struct{ Slowest, Share, Note, Text string }
	evalJSON(t, ctx, `(() => { const s = document.querySelector('[data-panel="pipeline-segments"]');
		return {slowest: s.dataset.slowest, share: s.dataset.share, note: document.querySelector('[data-testid="pipeline-note"]').innerText,
			text: document.querySelector('[data-testid="pipeline-summary"]').innerText}; })()`, &got)
	require.Equal(t, "inference", got.Slowest)
	share, err := strconv.ParseFloat(got.Share, 64)
	require.NoError(t, err)
	require.InDelta(t, inf/total, share, 1e-9)
	require.Contains(t, got.Note, "Means add up, percentiles do not")
	require.Contains(t, got.Text, "inference is the slowest segment")
	var rows []struct{ Segment, Share, Bytes string }
	evalJSON(t, ctx, `[...document.querySelectorAll('[data-panel="pipeline-segments"] tr[data-share]')].map(e => ({segment: e.dataset.segment, share: e.dataset.share, bytes: e.dataset.bytes || ""}))`, &rows)
	require.Len(t, rows, 3)
	require.Equal(t, strconv.FormatFloat(w.bytes, 'f', -1, 64), rows[0].Bytes, "the upload's bytes on the page")
	checkBrowserClean(t, b, base)
	screenshot(t, ctx, "pipeline.png")

	// The list of pipelines links the page.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/pipeline"), chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`))))
	byID = pagePanels(t, ctx)
	require.Equal(t, "ready", byID["pipelines"].State)
	require.Equal(t, "1", byID["pipelines"].Series)
	checkBrowserClean(t, b, base)
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}
