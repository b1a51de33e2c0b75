package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// What every browser test shares: finding Chromium, starting it headless
// with a recorder of console errors and requests, reading the panels of
// the testability contract, and screenshots.

// chromiumPath finds Debian's chromium (or its headless shell). A missing
// browser fails the test under CI=true and skips it otherwise.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-headless-shell", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found on PATH (CI=true): install Debian's chromium package (.ci/run does)")
	}
	t.Skip("chromium not found on PATH; apt-get install -y chromium to run the dashboard's browser tests")
	return ""
}

// browser records what the page did: console errors, uncaught
// exceptions, log entries of level error (CSP violations, failed loads)
// and every request's URL.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	errors   []string
	requests []string
}

func (b *browser) record(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.errors = append(b.errors, "console: "+strings.Join(parts, " "))
		}
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
		b.errors = append(b.errors, "exception: "+msg)
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			b.errors = append(b.errors, fmt.Sprintf("log(%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, e.Request.URL)
	}
}

func (b *browser) take() (errs, reqs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs, reqs = b.errors, b.requests
	b.errors, b.requests = nil, nil
	return errs, reqs
}

// panelInfo is one element of the testability contract.
type panelInfo struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Series string `json:"series"`
	Tiers  string `json:"tiers"`
	Text   string `json:"text"`
}

const panelsJS = `[...document.querySelectorAll('[data-panel]')].map(e => ({id: e.dataset.panel, state: e.dataset.state,
	series: e.dataset.series || "", tiers: e.dataset.tiers || "", text: e.innerText.slice(0, 160)}))`

// requireBundle fails under CI=true, and skips elsewhere, when the binary
// carries no dashboard bundle.
func requireBundle(t *testing.T, base string) {
	t.Helper()
	if strings.Contains(httpBody(t, base+"/"), "/assets/app.js") {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the binary was built without the dashboard bundle: run make build (npm ci + esbuild) first")
	}
	t.Skip("dashboard bundle not built (make web); skipping the browser part")
}

// openBrowser starts headless Chromium, recording into the returned
// browser; the context ends with the test (or after 2 minutes).
func openBrowser(t *testing.T, chrome string) (context.Context, *browser) {
	return openBrowserFor(t, chrome, 2*time.Minute)
}

// openBrowserFor is openBrowser with a deadline of d.
func openBrowserFor(t *testing.T, chrome string, d time.Duration) (context.Context, *browser) {
	t.Helper()
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	t.Cleanup(cancel)
	b := &browser{}
	bctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(b.record))
	t.Cleanup(cancel)
	// The first call starts the browser; it must not carry a timeout.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate("about:blank")), "start chromium")
	b.take()
	ctx, cancel := context.WithTimeout(bctx, d)
	t.Cleanup(cancel)
	return ctx, b
}

func evalJSON(t *testing.T, ctx context.Context, expr string, out any) {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
	require.NoError(t, err, "evaluate %s", expr)
	require.NoError(t, json.Unmarshal(raw, out), "evaluate %s: %s", expr, raw)
}

// pagePanels reads the page's panels (the testability contract) by id.
func pagePanels(t *testing.T, ctx context.Context) map[string]panelInfo {
	t.Helper()
	var panels []panelInfo
	evalJSON(t, ctx, panelsJS, &panels)
	byID := map[string]panelInfo{}
	for _, pn := range panels {
		byID[pn.ID] = pn
	}
	return byID
}

// checkBrowserClean: no console error, no request outside the appliance.
func checkBrowserClean(t *testing.T, b *browser, base string) {
	t.Helper()
	errs, reqs := b.take()
	require.Empty(t, errs, "console errors")
	for _, u := range reqs {
		require.True(t, strings.HasPrefix(u, base+"/") || strings.HasPrefix(u, "data:"), "request outside the appliance: %s", u)
	}
}

// screenshot saves the page to $E2E_SCREENSHOTS (or the test's temporary
// folder) and logs where.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("E2E_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NotEmpty(t, png)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// openPage navigates to url and waits for the page's data-ready.
func openPage(t *testing.T, ctx context.Context, url, what string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS(`#app[data-ready="true"]`))), what)
}
