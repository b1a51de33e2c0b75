package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The browser's window: tall enough that every panel of both pages is in
// view, since vmui only fetches a panel once it is scrolled into view.
const (
	windowWidth  = 1400
	windowHeight = 6000
	// vmuiPanelWidth is each vmui panel's width in its 12-column grid.
	vmuiPanelWidth = 3
	// scrapeSeconds is the scrape interval the dashboard assumes when its
	// config has none (the bench's appliance scrapes nothing).
	scrapeSeconds = 15
)

// load is one timed page load.
type load struct {
	ready   float64         // ms from navigation start to data-ready / all drawn
	queries float64         // ms from navigation start to the last query's answer
	timing  json.RawMessage // the page's requests, see resourceTiming
	errors  int             // vmui panels showing an error
}

// resourceTiming lists the page's requests (start and end, ms since
// navigation start), for the run dir: where the time of a load went.
const resourceTiming = `performance.getEntriesByType("resource").map((e) => [Math.round(e.startTime), Math.round(e.responseEnd), e.name.replace(location.origin, "").slice(0, 140)])`

// rangeResult is one range's loads on both sides.
type rangeResult struct {
	rng        string
	app, vm    []load
	cold       [2]load // the untimed first loads (appliance, vmui): caches cold
	appPanels  int     // panels on the Overview (ready or empty)
	vmPanels   int
	appQueries int // query_range requests of one Overview load
	vmQueries  int
	step       string // the step vmui was given
	vmTimedOut bool   // vmui's first load was not drawn within vmuiTimeout
	tiers      string // tiers that answered the Overview's panels
}

// vmuiDrawn is the script vmui's page runs at its start: on every frame it
// checks whether every panel of the dashboard is drawn (a uPlot canvas or
// vmui's alert for no data / an error), no spinner is shown and the
// resource timing holds the answers of all its query_range requests, and
// then sets data-drawn-ms on <html> to the time since navigation start.
// The counts it waits for come in the URL (bench_panels, bench_queries).
const vmuiDrawn = `(() => {
  if (!location.pathname.startsWith("/vmui")) return;
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  const wantPanels = +q.get("bench_panels"), wantQueries = +q.get("bench_queries");
  const check = () => {
    const panels = document.querySelectorAll(".vm-predefined-panel");
    const answered = performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/v1/query_range")).length;
    const drawn = panels.length >= wantPanels && answered >= wantQueries && !document.querySelector(".vm-spinner") &&
      [...panels].every((p) => p.querySelector(".vm-predefined-panel-body canvas, .vm-predefined-panel-body .vm-alert"));
    if (drawn) { document.documentElement.dataset.drawnMs = String(Math.round(performance.now())); return; }
    requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})();`

// lastAnswer is the time since navigation start of the last answer to an
// API request, from the resource timing.
const lastAnswer = `Math.round(Math.max(0, ...performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/")).map((e) => e.responseEnd)))`

func chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-headless-shell", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium not found on PATH: apt-get install -y chromium")
}

// measure loads the Overview and vmui's copy of it, one after the other,
// -runs times per range after one untimed load of each (which also
// captures the queries the Overview sends, for vmui's copy).
func measure(ctx context.Context, o options, s *systems, dir string) ([]rangeResult, error) {
	bin, err := chromium()
	if err != nil {
		return nil, err
	}
	alloc, cancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium")),
		chromedp.WindowSize(windowWidth, windowHeight),
		chromedp.Env("TZ=UTC"),
	)
	defer cancel()
	var (
		mu       sync.Mutex
		captured []string
	)
	bctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(func(ev any) {
		// The one-point query_range of a chart's value at now (start =
		// end, ui/web/src/chart.js) is not one of the Overview's range
		// queries: vmui's grids end at now.
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && strings.Contains(e.Request.URL, "/api/v1/query_range?") && !onePoint(e.Request.URL) {
			mu.Lock()
			captured = append(captured, e.Request.URL)
			mu.Unlock()
		}
	}))
	defer cancel()
	// The first call starts the browser; it must not carry a timeout.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	// Every load fetches the bundle and its data afresh on both sides.
	if _, err := chromedp.Call(bctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		return nil, err
	}
	if _, err := chromedp.Call(bctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: vmuiDrawn}); err != nil {
		return nil, err
	}

	var out []rangeResult
	for _, rng := range o.ranges {
		r := rangeResult{rng: rng}
		var vmURL string
		for i := 0; i <= o.runs; i++ {
			mu.Lock()
			captured = nil
			mu.Unlock()
			appURL := s.app.URL + "/?from=now-" + rng + "&to=now&refresh=off"
			l, panels, err := loadApp(bctx, appURL)
			if err != nil {
				return nil, fmt.Errorf("Overview at %s: %w", rng, err)
			}
			mu.Lock()
			reqs := slices.Clone(captured)
			mu.Unlock()
			if i == 0 {
				r.appPanels, r.appQueries = len(panels), len(reqs)
				r.tiers = panelTiers(panels)
				d, step, nq, err := vmuiDashboard(ctx, s.app.URL, reqs)
				if err != nil {
					return nil, err
				}
				b, _ := json.MarshalIndent(d, "", "  ")
				if err := os.WriteFile(filepath.Join(s.dashDir, "overview.json"), b, 0o644); err != nil {
					return nil, err
				}
				os.WriteFile(filepath.Join(dir, "vmui-overview-"+rng+".json"), b, 0o644)
				r.vmPanels, r.vmQueries, r.step = countPanels(d), nq, step
				vmURL = s.vm.URL + "/vmui/#/dashboards?" + url.Values{
					"g0.range_input":   {rng},
					"g0.end_input":     {time.Now().UTC().Format("2006-01-02T15:04:05")},
					"g0.relative_time": {"none"},
					"g0.step_input":    {step},
					"bench_panels":     {strconv.Itoa(r.vmPanels)},
					"bench_queries":    {strconv.Itoa(nq)},
				}.Encode()
				log.Printf("%s: the Overview has %d panels (%d query_range requests, tiers %s); vmui gets %d panels, %d queries, step %s",
					rng, r.appPanels, r.appQueries, r.tiers, r.vmPanels, nq, step)
			}
			v := load{ready: math.Inf(1)}
			err = nil
			if !r.vmTimedOut {
				v, err = loadVMUI(bctx, vmURL)
			}
			if errors.Is(err, errNotDrawn) && i == 0 {
				// Not once more per run: the appliance's runs go on alone.
				r.vmTimedOut = true
			} else if err != nil && !errors.Is(err, errNotDrawn) {
				return nil, fmt.Errorf("vmui at %s: %w", rng, err)
			}
			if i == 1 {
				for name, t := range map[string]json.RawMessage{"appliance": l.timing, "vmui": v.timing} {
					os.WriteFile(filepath.Join(dir, "timing-"+name+"-"+rng+".json"), t, 0o644)
				}
			}
			if i == 0 {
				r.cold = [2]load{l, v}
				log.Printf("%s: untimed first loads: appliance %.0f ms, vmui %.0f ms", rng, l.ready, v.ready)
				continue
			}
			r.app = append(r.app, l)
			r.vm = append(r.vm, v)
			log.Printf("%s run %d: appliance %.0f ms (last answer %.0f ms), vmui %.0f ms (last answer %.0f ms)", rng, i, l.ready, l.queries, v.ready, v.queries)
		}
		out = append(out, r)
	}
	return out, nil
}

// onePoint tells a query_range of one point (start = end).
func onePoint(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	q := p.Query()
	return q.Get("start") != "" && q.Get("start") == q.Get("end")
}

// panelInfo is one element of the dashboard's testability contract.
type panelInfo struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Tiers string `json:"tiers"`
}

func loadApp(bctx context.Context, u string) (load, []panelInfo, error) {
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(u),
		chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"][data-ready-ms]`))); err != nil {
		return load{}, nil, err
	}
	var r struct {
		Ready   string          `json:"ready"`
		Queries float64         `json:"queries"`
		Timing  json.RawMessage `json:"timing"`
		Panels  []panelInfo     `json:"panels"`
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`({ready: document.getElementById("app").dataset.readyMs, queries: `+lastAnswer+`, timing: `+resourceTiming+`,
		panels: [...document.querySelectorAll("[data-panel]")].map((e) => ({id: e.dataset.panel, state: e.dataset.state, tiers: e.dataset.tiers || ""}))})`))
	if err != nil {
		return load{}, nil, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return load{}, nil, err
	}
	for _, p := range r.Panels {
		if p.State != "ready" && p.State != "empty" {
			return load{}, nil, fmt.Errorf("panel %s is %s", p.ID, p.State)
		}
	}
	ms, err := strconv.ParseFloat(r.Ready, 64)
	return load{ready: ms, queries: r.Queries, timing: r.Timing}, r.Panels, err
}

// errNotDrawn is loadVMUI's error when vmui's page was not drawn within
// vmuiTimeout; the report shows the range's vmui time as more than that.
var errNotDrawn = errors.New("not drawn")

// vmuiTimeout bounds one vmui load.
const vmuiTimeout = 3 * time.Minute

// vmuiPending says what a vmui page still lacks: panels without a canvas
// or alert, spinners, query_range answers.
const vmuiPending = `({undrawn: [...document.querySelectorAll(".vm-predefined-panel")].filter((p) => !p.querySelector(".vm-predefined-panel-body canvas, .vm-predefined-panel-body .vm-alert")).map((p) => p.querySelector("h3").textContent),
	panels: document.querySelectorAll(".vm-predefined-panel").length, spinners: document.querySelectorAll(".vm-spinner").length,
	answered: performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/v1/query_range")).length})`

func loadVMUI(bctx context.Context, u string) (load, error) {
	ctx, cancel := context.WithTimeout(bctx, vmuiTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(u),
		chromedp.WaitReady(chromedp.CSS(`html[data-drawn-ms]`))); err != nil {
		if ctx.Err() == nil || bctx.Err() != nil {
			return load{}, err
		}
		dctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		pending, _ := chromedp.Run(dctx, chromedp.Evaluate[[]byte](vmuiPending))
		log.Printf("vmui not drawn after %s: %s", vmuiTimeout, pending)
		return load{ready: math.Inf(1)}, errNotDrawn
	}
	var r struct {
		Drawn   string          `json:"drawn"`
		Queries float64         `json:"queries"`
		Timing  json.RawMessage `json:"timing"`
		Errors  []string        `json:"errors"`
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`({drawn: document.documentElement.dataset.drawnMs, queries: `+lastAnswer+`, timing: `+resourceTiming+`,
		errors: [...document.querySelectorAll(".vm-predefined-panel .vm-alert_error")].map((e) => e.textContent.slice(0, 200))})`))
	if err != nil {
		return load{}, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return load{}, err
	}
	if len(r.Errors) > 0 {
		// Drawn, with vmui's error in the panel: counted, and reported.
		log.Printf("vmui: %d panels show an error: %q", len(r.Errors), r.Errors)
	}
	ms, err := strconv.ParseFloat(r.Drawn, 64)
	return load{ready: ms, queries: r.Queries, timing: r.Timing, errors: len(r.Errors)}, err
}

func panelTiers(ps []panelInfo) string {
	set := map[string]bool{}
	for _, p := range ps {
		for _, t := range strings.Split(p.Tiers, ",") {
			if t != "" {
				set[t] = true
			}
		}
	}
	var out []string
	for _, t := range []string{"raw", "1m", "5m"} {
		if set[t] {
			out = append(out, t)
		}
	}
	return strings.Join(out, ",")
}

// vmuiDashboard is vmui's custom dashboard format (-vmui.customDashboardsPath).
type vmuiDash struct {
	Title string    `json:"title"`
	Rows  []vmuiRow `json:"rows"`
}

type vmuiRow struct {
	Title  string      `json:"title"`
	Panels []vmuiPanel `json:"panels"`
}

type vmuiPanel struct {
	Title string   `json:"title"`
	Width int      `json:"width"`
	Expr  []string `json:"expr"`
}

func countPanels(d vmuiDash) int {
	n := 0
	for _, r := range d.Rows {
		n += len(r.Panels)
	}
	return n
}

// vmuiDashboard builds vmui's copy of the Overview: its rows and chart
// panels (not the stat and table ones, which vmui's dashboards cannot
// show), each with exactly the expressions the Overview sent as
// query_range requests (reqs, captured from the browser), and the step
// most of them used.
func vmuiDashboard(ctx context.Context, base string, reqs []string) (vmuiDash, string, int, error) {
	sent := map[string]bool{}
	steps := map[string]int{}
	for _, r := range reqs {
		u, err := url.Parse(r)
		if err != nil {
			return vmuiDash{}, "", 0, err
		}
		q := u.Query()
		sent[q.Get("query")] = true
		steps[q.Get("step")]++
	}
	var step string
	for s, n := range steps {
		if step == "" || n > steps[step] {
			step = s
		}
	}
	b, err := getBody(ctx, base+"/api/v1/appliance/dashboards/overview")
	if err != nil {
		return vmuiDash{}, "", 0, err
	}
	var def struct {
		Data struct {
			Rows []struct {
				Title   string `json:"title"`
				Service *struct {
					Selector string `json:"selector"`
				} `json:"service"`
				Panels []struct {
					Title   string `json:"title"`
					Kind    string `json:"kind"`
					Queries []struct {
						Expr string `json:"expr"`
					} `json:"queries"`
				} `json:"panels"`
			} `json:"rows"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &def); err != nil {
		return vmuiDash{}, "", 0, fmt.Errorf("overview definition: %w", err)
	}
	stepList := make([]float64, 0, len(steps))
	for s := range steps {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil {
			stepList = append(stepList, f)
		}
	}
	// One row: vmui shows only its first row expanded.
	d := vmuiDash{Title: "Overview (the appliance's queries)"}
	given := map[string]bool{} // the sum by (le) queries handed out
	vr := vmuiRow{Title: "Overview"}
	n := 0
	for _, row := range def.Data.Rows {
		sel := ""
		if row.Service != nil {
			sel = row.Service.Selector
		}
		for _, p := range row.Panels {
			if p.Kind != "timeseries" && p.Kind != "heatmap" {
				continue
			}
			vp := vmuiPanel{Title: row.Title + ": " + p.Title, Width: vmuiPanelWidth}
			for _, q := range p.Queries {
				for _, st := range stepList {
					e := substitute(q.Expr, st, sel)
					if sent[e] {
						vp.Expr = append(vp.Expr, e)
						break
					}
					// The page computes histogram_quantile(q, sum by (le)
					// (...)) from the `sum by (le)` answer it fetched once
					// for all the quantiles of that histogram: vmui gets
					// that query, once.
					if in := quantileInner(e); in != "" && sent[in] && !given[in] {
						given[in] = true
						vp.Expr = append(vp.Expr, in)
						break
					}
				}
			}
			if len(vp.Expr) > 0 {
				vr.Panels = append(vr.Panels, vp)
				n += len(vp.Expr)
			}
		}
	}
	d.Rows = []vmuiRow{vr}
	if n == 0 {
		return d, "", 0, fmt.Errorf("none of the Overview's %d query_range requests matched its definition", len(reqs))
	}
	return d, promDur(parseStep(step)), n, nil
}

// quantileInner is ui/web/src/util.js' quantileCall: the inner
// `sum by (le)` expression of histogram_quantile(<number>, sum by (le)
// (...)), "" for anything else. (The page also checks the brackets; an
// inner expression the page sent passed that check.)
func quantileInner(expr string) string {
	m := quantileCallRE.FindStringSubmatch(expr)
	if m == nil {
		return ""
	}
	in := strings.TrimSpace(m[1])
	if !sumByLeRE.MatchString(in) {
		return ""
	}
	return in
}

var (
	quantileCallRE = regexp.MustCompile(`^\s*histogram_quantile\s*\(\s*[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?\s*,([\s\S]*)\)\s*$`)
	sumByLeRE      = regexp.MustCompile(`^sum\s+by\s*\(\s*le\s*\)\s*\(`)
)

func parseStep(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// substitute fills a panel's placeholders as the dashboard's front-end
// does (ui/web/src/util.js: substitute, rateInterval). $__range is not
// used by the Overview.
func substitute(expr string, step float64, sel string) string {
	rate := math.Max(4*scrapeSeconds, step)
	return strings.NewReplacer("$__rate_interval", promDur(rate), "$__interval", promDur(step), "$sel", sel).Replace(expr)
}

// promDur is ui/web/src/util.js' promDur: whole seconds in the largest
// unit that divides them.
func promDur(sec float64) string {
	s := int64(math.Max(1, math.Ceil(sec)))
	switch {
	case s%86400 == 0:
		return strconv.FormatInt(s/86400, 10) + "d"
	case s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	}
	return strconv.FormatInt(s, 10) + "s"
}
