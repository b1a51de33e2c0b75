package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestDashboardInBrowser drives Debian's headless Chromium against the
// real binary running `appliance demo`: every page renders and every
// panel on it reaches ready with data, with no console error and no
// request outside the appliance's origin; the time-range picker, zoom
// and URL state round-trip; a silence made in the UI appears in
// /api/v2/silences and leaves the active ones when expired in the UI;
// dark mode renders; /alerts previews the next P2 digest. Screenshots of
// every page (overview and model in light and dark) go to $E2E_SCREENSHOTS
// (or a temporary folder), named in the log. With UPDATE_SCREENSHOTS=1 the
// test also writes the README's docs/dashboard-overview.png and
// docs/dashboard-model.png (1280×800, palette PNG).
func TestDashboardInBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	shots := os.Getenv("E2E_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(shots, 0o755))
	t.Logf("screenshots in %s", shots)

	p := startDemo(t, 2)
	base := "http://" + p.addr

	// The binary must carry the bundle and serve it under the CSP.
	resp, err := http.Get(base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "default-src 'self'", resp.Header.Get("Content-Security-Policy"))
	index := httpBody(t, base+"/")
	if !strings.Contains(index, "/assets/app.js") {
		if os.Getenv("CI") == "true" {
			t.Fatal("the binary was built without the dashboard bundle: run make build (npm ci + esbuild) first")
		}
		t.Skip("dashboard bundle not built (make web); skipping the browser test")
	}
	// Prometheus' rule links (/graph?g0.expr=...) land on /explore.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noFollow.Get(base + "/graph?g0.expr=" + url.QueryEscape(`up{job="vllm"}`) + "&g0.tab=1")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "/explore?expr="+url.QueryEscape(`up{job="vllm"}`)+"&tab=table", resp.Header.Get("Location"))

	// rate() windows need a few scrapes (5 s apart in the demo).
	eventually(t, 90*time.Second, "vLLM latency and probe data", func() bool {
		return len(p.instant(`histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[1m])))`, time.Time{})) > 0 &&
			len(p.instant(`count_over_time(vllm:num_requests_running[1m]) >= 4`, time.Time{})) > 0
	})

	// A probe failure, so the probes page's "failures by reason" has one:
	// the second instance goes down until its probe fails, then comes back.
	m := regexp.MustCompile(`simulated vLLM instances at (\S+), (\S+)`).FindStringSubmatch(p.Output())
	require.NotNil(t, m, "demo output names its instances:\n%s", p.Output())
	control := func(body string) {
		resp, err := http.Post("http://"+m[2]+"/demo/control", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}
	control(`{"down": true}`)
	eventually(t, 90*time.Second, "a failed probe", func() bool {
		return len(p.instant(`probe_success{reason!=""}`, time.Time{})) > 0
	})
	control(`{"down": false}`)
	eventually(t, 60*time.Second, "the instance back up", func() bool {
		return len(p.instant(`min(up{job="vllm"}) == 1`, time.Time{})) > 0
	})
	// A page's range ends at a whole step before now (5 s at 15 minutes),
	// so a failure from the last seconds is not in it yet: the page is
	// opened once the failure is at least 10 s old (seen in CI: the one
	// failed probe 0.8 s after the probes page's end, its panel empty).
	eventually(t, 60*time.Second, "a failed probe at least 10 s old", func() bool {
		// Over a minute: the failure's series is marked stale at the
		// next run that succeeds.
		return len(p.instant(`count_over_time(probe_success{reason!=""}[1m])`, time.Now().Add(-10*time.Second))) > 0
	})

	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	defer cancel()
	b := &browser{}
	bctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(b.record))
	defer cancel()
	b.ctx = bctx
	// The first call starts the browser; it must not carry a timeout.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate("about:blank")), "start chromium")
	run := func(timeout time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, timeout)
		defer cancel()
		require.NoError(t, chromedp.Do(ctx, actions...), what)
	}
	eval := func(expr string, out any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		require.NoError(t, err, "evaluate %s", expr)
		require.NoError(t, json.Unmarshal(raw, out), "evaluate %s: %s", expr, raw)
	}
	screenshot := func(name string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err, "screenshot %s", name)
		file := filepath.Join(shots, name+".png")
		require.NoError(t, os.WriteFile(file, png, 0o644))
		return file
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(bctx, chromedp.Location())
		require.NoError(t, err)
		return loc
	}
	b.take() // about:blank

	var checkPage func(name string, wantPanels int, allowEmpty bool) []panelInfo
	// check asserts the page's contract after it is ready, saves its
	// screenshot, and that nothing was logged or fetched from elsewhere.
	check := func(name string, wantPanels int) []panelInfo {
		t.Helper()
		return checkPage(name, wantPanels, false)
	}
	checkPage = func(name string, wantPanels int, allowEmpty bool) []panelInfo {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
		defer cancel()
		err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`)))
		var panels []panelInfo
		eval(panelsJS, &panels)
		require.NoError(t, err, "%s: data-ready never true; panels: %+v", name, panels)
		require.GreaterOrEqual(t, len(panels), wantPanels, "%s: panels %+v", name, panels)
		errs, reqs := b.take()
		for _, pn := range panels {
			if allowEmpty && pn.State == "empty" {
				continue
			}
			if pn.State != "ready" {
				replayRanges(t, reqs)
				t.Logf("the demo's output, last lines:\n%s", lastLines(p.Output(), 40))
			}
			require.Equal(t, "ready", pn.State, "%s: panel %s is %s, not ready with data: %q", name, pn.ID, pn.State, pn.Text)
			require.NotEqual(t, "0", pn.Series, "%s: panel %s drew no series", name, pn.ID)
		}
		file := screenshot(name)
		require.Empty(t, errs, "%s: console errors", name)
		for _, r := range reqs {
			if strings.HasPrefix(r, "data:") {
				continue // inline resources (the date input's icon), never fetched
			}
			require.True(t, strings.HasPrefix(r, base+"/"), "%s: request outside the appliance's origin: %s", name, r)
		}
		var readyMs string
		eval(`document.getElementById("app").dataset.readyMs || ""`, &readyMs)
		t.Logf("%s: %d panels ready, %s ms from navigation to data-ready (%s)", name, len(panels), readyMs, file)
		return panels
	}
	nav := func(path string) {
		t.Helper()
		run(60*time.Second, "open "+path, chromedp.Navigate(base+path))
	}

	// Every page renders, with its panels ready and drawn.
	var services []struct {
		Job   string `json:"job"`
		Model string `json:"model"`
	}
	_, r := p.get("/api/v1/appliance/services", nil)
	require.NoError(t, json.Unmarshal(r.Data, &services))
	require.NotEmpty(t, services, "no recognised service in the demo")
	model := "/model?" + url.Values{"job": {services[0].Job}, "model": {services[0].Model}}.Encode() + "&from=now-15m&to=now"
	for _, pg := range []struct{ name, path string }{
		{"overview", "/?from=now-15m&to=now"}, {"overview-24h", "/?from=now-24h&to=now"}, {"overview-7d", "/?from=now-7d&to=now"},
		{"overview-90d", "/?from=now-90d&to=now"}, {"model", model}, {"probes", "/probes?from=now-15m&to=now"},
		{"hardware", "/hardware?from=now-15m&to=now"}, {"targets", "/targets"}, {"alerts-empty", "/alerts"},
		{"explore", "/explore?from=now-15m&to=now&expr=" + url.QueryEscape(`sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[1m]))`)},
	} {
		nav(pg.path)
		want := 1
		if pg.name == "alerts-empty" {
			// Nothing fires in a fresh demo: the lists are there, empty.
			run(90*time.Second, "alerts page", chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`)),
				chromedp.WaitReady(chromedp.CSS(`[data-panel="silences"]`)))
			errs, _ := b.take()
			require.Empty(t, errs, "alerts: console errors")
			t.Logf("alerts-empty: %s", screenshot("alerts-empty"))
			continue
		}
		panels := check(pg.name, want)
		if pg.name == "explore" {
			stats, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`[data-testid="query-stats"]`)))
			require.NoError(t, err)
			require.Contains(t, stats, "heatmap", "a result with le is drawn as a heatmap")
			require.Regexp(t, `^raw`, panels[0].Tiers)
		}
	}

	// The README's screenshots, at a fixed size, from the same pages.
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		for _, d := range []struct{ name, path string }{
			{"dashboard-overview", "/?from=now-5m&to=now&refresh=off"},
			{"dashboard-model", strings.Replace(model, "now-15m", "now-5m", 1) + "&refresh=off"},
		} {
			run(90*time.Second, "open "+d.path+" at 1280×800", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(base+d.path),
				chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`)))
			ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			cancel()
			require.NoError(t, err, "screenshot %s", d.name)
			small, err := paletted(png)
			require.NoError(t, err)
			file := filepath.Join("..", "docs", d.name+".png")
			require.NoError(t, os.WriteFile(file, small, 0o644))
			t.Logf("wrote %s (%d bytes)", file, len(small))
		}
		run(30*time.Second, "reset the viewport", chromedp.ResetViewport())
		b.take()
	}

	// A P2 alert waits for the daily digest: /alerts previews it below.
	digestMarker := fmt.Sprintf("e2e-digest-%d", time.Now().UnixNano())
	code, body := p.post("/api/v2/alerts", "application/json", []byte(fmt.Sprintf(
		`[{"labels":{"alertname":%q,"severity":"P2","job":"vllm"},"annotations":{"summary":"a P2 for the digest"}}]`, digestMarker)), nil)
	require.Equal(t, http.StatusOK, code, body)

	// The SLO pages: the demo defines a latency and an availability SLO.
	// /slo lists both, least budget left first, and charts their
	// attainment (empty until the rules have recorded a window).
	nav("/slo?from=now-15m&to=now")
	panels := checkPage("slo", 1, true)
	require.Equal(t, "slo-status", panels[0].ID)
	require.Equal(t, "ready", panels[0].State, "slo status: %q", panels[0].Text)
	require.Equal(t, "2", panels[0].Series)
	var budgets []string
	eval(`[...document.querySelectorAll("[data-panel=slo-status] tr[data-slo]")].map((r) => r.dataset.budgetLeft)`, &budgets)
	require.Len(t, budgets, 2)
	var prev float64 = -1e300
	for _, v := range budgets {
		if v == "" {
			prev = 1e300 // no traffic: sorted last
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, f, prev, "sorted by budget left: %v", budgets)
		prev = f
	}
	// /reports: the preview of this week's report lists both SLOs; "send
	// now" sends last week's, which lands in the archive.
	nav("/reports?refresh=off")
	panels = checkPage("reports-before-send", 2, true)
	for _, pn := range panels {
		if pn.ID == "report-preview" {
			require.Equal(t, "ready", pn.State, "report preview: %q", pn.Text)
			require.Equal(t, "2", pn.Series)
		}
	}
	// The answer sets the result and reloads the archive in one render,
	// so once it reads "sent" the archive shown is the one after the send.
	var lastWeek string
	eval(`document.querySelector(".bar [data-testid=report-send]").dataset.week`, &lastWeek)
	run(60*time.Second, "send now", chromedp.Click(chromedp.CSS(`.bar [data-testid="report-send"]`)),
		chromedp.WaitReady(chromedp.CSS(`.bar [data-testid="report-send-result"][data-result="sent"]`)),
		chromedp.WaitReady(chromedp.CSS(`[data-panel="reports"][data-state="ready"] tr[data-week="`+lastWeek+`"]`)))
	check("reports", 2)

	// Explore completes metric names from the label API.
	nav("/explore")
	run(30*time.Second, "completion", chromedp.WaitReady(chromedp.CSS(`[data-testid="expr"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="expr"]`), "vllm:num_req"))
	run(30*time.Second, "completion list", chromedp.WaitReady(chromedp.CSS(`[data-completion="vllm:num_requests_running"]`)))
	b.take()

	// Time-range picker and URL state round-trip: a preset writes the
	// URL, the URL (after a reload) selects the preset, links between
	// pages keep it, and a drag on a chart zooms to an absolute range.
	nav("/?from=now-15m&to=now&refresh=off")
	check("overview-15m", 1)
	run(30*time.Second, "pick 6h", chromedp.Click(chromedp.CSS(`button[data-range="6h"]`)),
		chromedp.WaitReady(chromedp.CSS(`button.on[data-range="6h"]`)))
	loc := location()
	u, err := url.Parse(loc)
	require.NoError(t, err)
	require.Equal(t, "now-6h", u.Query().Get("from"))
	require.Equal(t, "off", u.Query().Get("refresh"))
	run(30*time.Second, "reload", chromedp.Reload(), chromedp.WaitReady(chromedp.CSS(`button.on[data-range="6h"]`)))
	check("overview-6h", 1)
	run(30*time.Second, "follow nav link", chromedp.Click(chromedp.CSS(`nav a[href^="/hardware"]`)),
		chromedp.WaitReady(chromedp.CSS(`button.on[data-range="6h"]`)))
	loc = location()
	require.Contains(t, loc, "/hardware?")
	require.Contains(t, loc, "from=now-6h")
	check("hardware-6h", 1)
	// Zoom on the overview's first chart: the drag sets an absolute range
	// on every chart of the page (a part of it may hold no data yet).
	nav("/?from=now-15m&to=now")
	check("overview-before-zoom", 1)
	var box []float64
	eval(`(() => { const r = document.querySelector('.u-over').getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()`, &box)
	y := box[1] + box[3]/2
	left := chromedp.Button("left")
	run(30*time.Second, "drag to zoom",
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, box[0]+box[2]*0.6, y, left),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0]+box[2]*0.8, y, left),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0]+box[2]*0.95, y, left),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, box[0]+box[2]*0.95, y, left),
		chromedp.WaitReady(chromedp.CSS(`.paused`)))
	loc = location()
	u, err = url.Parse(loc)
	require.NoError(t, err)
	require.Regexp(t, `^\d{13}$`, u.Query().Get("from"), "zoom writes an absolute range")
	require.Regexp(t, `^\d{13}$`, u.Query().Get("to"))
	checkPage("overview-zoomed", 1, true)

	// An alert posted to the appliance shows in its Alertmanager group; a
	// silence made from it in the UI (matchers prefilled, a preview of
	// what it matches) shows in /api/v2/silences and mutes the alert;
	// expiring it in the UI takes it out of the active ones.
	marker := fmt.Sprintf("e2e-dashboard-%d", time.Now().UnixNano())
	alert := fmt.Sprintf(`[{"labels":{"alertname":%q,"severity":"P1","instance":"127.0.0.1:1"},"annotations":{"summary":"posted by the browser test"}}]`, marker)
	code, body = p.post("/api/v2/alerts", "application/json", []byte(alert), nil)
	require.Equal(t, http.StatusOK, code, body)
	// Its row, by fingerprint: the demo's own alerts may fire too.
	var posted []struct {
		Fingerprint string `json:"fingerprint"`
	}
	require.NoError(t, json.Unmarshal([]byte(httpBody(t, base+"/api/v2/alerts?filter="+url.QueryEscape(fmt.Sprintf("alertname=%q", marker)))), &posted))
	require.Len(t, posted, 1)
	silenceButton := fmt.Sprintf(`[data-panel="alert-groups"][data-state="ready"] tr[data-alert=%q] [data-testid="silence-alert"]`, posted[0].Fingerprint)
	nav("/alerts")
	run(60*time.Second, "alert in its group",
		chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`)),
		chromedp.WaitReady(chromedp.CSS(silenceButton)))
	screenshot("alerts")
	run(30*time.Second, "silence from the alert", chromedp.Click(chromedp.CSS(silenceButton)))
	run(30*time.Second, "silence form", chromedp.WaitReady(chromedp.CSS(`[data-testid="silence-form"]`)))
	var matchers [][2]string
	eval(`[...document.querySelectorAll('[data-testid="silence-form"] .matcher')].filter(m => m.querySelector('input[name="matcher-name"]')).map(m => [m.querySelector('input[name="matcher-name"]').value, m.querySelector('input[name="matcher-value"]').value])`, &matchers)
	require.Contains(t, matchers, [2]string{"alertname", marker}, "matchers prefilled from the alert")
	require.Contains(t, matchers, [2]string{"severity", "P1"})
	eventually(t, 30*time.Second, "the silence preview matching the alert", func() bool {
		var text string
		eval(`document.querySelector('[data-testid="silence-preview"]').textContent`, &text)
		return strings.Contains(text, "matches 1 active alert") && strings.Contains(text, marker)
	})
	run(30*time.Second, "fill silence", chromedp.SendKeys(chromedp.CSS(`input[name="comment"]`), "made by the browser test"))
	run(30*time.Second, "submit silence", chromedp.Click(chromedp.CSS(`[data-testid="silence-create"]`)))
	run(30*time.Second, "silence listed", chromedp.WaitReady(chromedp.CSS(`tr[data-silence-state="active"]`)))
	silence := func() (id, state string) {
		resp, err := http.Get(base + "/api/v2/silences")
		require.NoError(t, err)
		defer resp.Body.Close()
		var list []struct {
			ID       string                 `json:"id"`
			Status   struct{ State string } `json:"status"`
			Matchers []struct{ Name, Value string }
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
		for _, s := range list {
			for _, m := range s.Matchers {
				if m.Name == "alertname" && m.Value == marker {
					return s.ID, s.Status.State
				}
			}
		}
		return "", ""
	}
	id, state := silence()
	require.NotEmpty(t, id, "the silence made in the UI is not in /api/v2/silences")
	require.Equal(t, "active", state)
	eventually(t, 30*time.Second, "the alert muted by the silence", func() bool {
		resp, err := http.Get(base + "/api/v2/alerts?filter=" + url.QueryEscape(fmt.Sprintf("alertname=%q", marker)))
		require.NoError(t, err)
		defer resp.Body.Close()
		var as []struct{ Status struct{ State string } }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&as))
		return len(as) == 1 && as[0].Status.State == "suppressed"
	})
	screenshot("alerts-silence")
	run(30*time.Second, "expire silence",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-silence=%q] [data-testid="silence-expire"]`, id))),
		chromedp.WaitReady(chromedp.CSS(fmt.Sprintf(`tr[data-silence=%q][data-silence-state="expired"]`, id))))
	_, state = silence()
	require.Equal(t, "expired", state, "the silence expired in the UI is still active")

	// The preview of the next P2 digest lists the P2 alert (once its
	// group flushed) and says when the digest goes out, as the API does.
	eventually(t, 60*time.Second, "the P2 alert in the digest preview", func() bool {
		nav("/alerts")
		run(60*time.Second, "alerts page", chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`)))
		var n int
		eval(fmt.Sprintf(`document.querySelectorAll('[data-panel="digest-preview"][data-state="ready"] tr[data-digest-alert=%q]').length`, digestMarker), &n)
		return n == 1
	})
	var digestAt, digestText string
	eval(`document.querySelector('[data-testid="digest-at"]').dataset.at`, &digestAt)
	eval(`document.querySelector('[data-testid="digest-text"]').textContent`, &digestText)
	require.Contains(t, digestText, "a P2 for the digest", "the digest's text lists the alert's summary")
	var preview struct {
		At    string `json:"at"`
		Title string `json:"title"`
	}
	_, r = p.get("/api/v1/appliance/digest/preview", nil)
	require.NoError(t, json.Unmarshal(r.Data, &preview))
	require.Equal(t, preview.At, digestAt)
	require.Regexp(t, `^Daily digest \d{4}-\d\d-\d\d: \d+ alerts`, preview.Title)
	t.Logf("alerts-digest: %s", screenshot("alerts-digest"))
	errs, _ := b.take()
	require.Empty(t, errs, "alerts: console errors")

	// Dark mode renders (and is remembered across pages).
	nav("/?from=now-1h&to=now")
	run(30*time.Second, "dark mode", chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="theme"]`)),
		chromedp.WaitReady(chromedp.CSS(`html[data-theme="dark"]`)))
	var bg string
	eval(`getComputedStyle(document.body).backgroundColor`, &bg)
	require.Equal(t, "rgb(15, 17, 21)", bg)
	check("overview-dark", 1)
	nav(model)
	run(30*time.Second, "dark model", chromedp.WaitReady(chromedp.CSS(`html[data-theme="dark"]`)))
	check("model-dark", 1)
}

// paletted re-encodes a screenshot as a palette PNG at the best
// compression: the 255 most used colours (flat UI colours and the chart
// lines), every other pixel mapped to the nearest of them.
func paletted(in []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(in))
	if err != nil {
		return nil, fmt.Errorf("decode screenshot: %w", err)
	}
	b := img.Bounds()
	count := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			count[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	rgb := func(c color.RGBA) uint32 { return uint32(c.R)<<16 | uint32(c.G)<<8 | uint32(c.B) }
	colors := make([]color.RGBA, 0, len(count))
	for c := range count {
		colors = append(colors, c)
	}
	sort.Slice(colors, func(i, j int) bool {
		if count[colors[i]] != count[colors[j]] {
			return count[colors[i]] > count[colors[j]]
		}
		return rgb(colors[i]) < rgb(colors[j])
	})
	pal := make(color.Palette, 0, 256)
	for _, c := range colors[:min(255, len(colors))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(b, pal)
	nearest := map[color.RGBA]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := nearest[c]
			if !ok {
				i = uint8(pal.Index(c))
				nearest[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func httpBody(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// replayRanges asks the appliance again, as the page asked and with
// nocache=1, for each query_range the page sent, and logs the answers
// that hold no series: when a panel is empty, whether the storage or the
// range cache answered so, and whether it still does.
func replayRanges(t *testing.T, reqs []string) {
	t.Helper()
	count := func(u string) string {
		resp, err := http.Get(u)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		var a struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []struct {
					Values [][2]any `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			return fmt.Sprintf("%d: %v", resp.StatusCode, err)
		}
		points := 0
		for _, r := range a.Data.Result {
			points += len(r.Values)
		}
		return fmt.Sprintf("%s %s: %d series, %d points (tiers %s)", a.Status, a.Error, len(a.Data.Result), points, resp.Header.Get("X-Appliance-Tiers"))
	}
	for _, r := range reqs {
		u, err := url.Parse(r)
		if err != nil || u.Path != "/api/v1/query_range" {
			continue
		}
		again := count(r)
		q := u.Query()
		q.Set("nocache", "1")
		u.RawQuery = q.Encode()
		t.Logf("replay %s [%s, %s] step %s: as asked %s; nocache %s", q.Get("query"), q.Get("start"), q.Get("end"), q.Get("step"), again, count(u.String()))
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
