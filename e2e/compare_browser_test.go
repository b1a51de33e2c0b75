package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pushVersions pushes a latency histogram of two model versions through
// /api/v1/import/prometheus, three samples each, two minutes apart, the
// last at end: v1 mostly under 0.5 s, v2 (the new release) slower.
func pushVersions(t *testing.T, p *proc, metric string, end time.Time) {
	t.Helper()
	les := []string{"0.1", "0.25", "0.5", "1", "2.5", "5", "+Inf"}
	per := map[string][]float64{ // cumulative counts per minute of traffic
		"v1": {10, 60, 150, 190, 198, 200, 200},
		"v2": {2, 15, 50, 120, 175, 196, 200},
	}
	var b strings.Builder
	for i := 0; i < 3; i++ {
		ts := end.Add(time.Duration(i-2) * 2 * time.Minute).UnixMilli()
		for _, v := range []string{"v1", "v2"} {
			for j, le := range les {
				fmt.Fprintf(&b, "%s_bucket{job=\"release\",model_version=%q,le=%q} %g %d\n", metric, v, le, per[v][j]*float64(2*i), ts)
			}
			fmt.Fprintf(&b, "%s_count{job=\"release\",model_version=%q} %g %d\n", metric, v, per[v][len(les)-1]*float64(2*i), ts)
			fmt.Fprintf(&b, "%s_sum{job=\"release\",model_version=%q} %g %d\n", metric, v, 100*float64(2*i), ts)
		}
	}
	code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
	require.Equal(t, http.StatusNoContent, code, body)
}

// compareReport is what the test reads of GET /api/v1/appliance/compare.
type compareReport struct {
	A, B struct {
		Name      string
		Count     float64
		CDF       [][2]float64
		Quantiles map[string]float64
	}
	Deltas map[string]float64
}

// TestCompareVersions pushes a new version label of a latency histogram
// and checks that /compare's data (the API, then the page in Chromium)
// shows both distributions with the quantiles that histogram_quantile
// gives on each version.
func TestCompareVersions(t *testing.T) {
	chrome := chromiumPath(t)
	p := startDemo(t, 1)
	const metric = "release_request_latency_seconds"
	end := time.Now().Truncate(time.Second)
	pushVersions(t, p, metric, end)
	from := end.Add(-5 * time.Minute)
	eventually(t, 30*time.Second, "the pushed samples searchable", func() bool {
		v := p.instant(`count(count_over_time(`+metric+`_count[5m]) == 3)`, end)
		return len(v) == 1 && value(t, v[0]) == 2
	})

	q := url.Values{"metric": {metric}, "label": {"model_version"}, "a": {"v1"}, "b": {"v2"},
		"from": {strconv.FormatInt(from.Unix(), 10)}, "to": {strconv.FormatInt(end.Unix(), 10)}}
	code, r := p.get("/api/v1/appliance/compare", q)
	require.Equal(t, http.StatusOK, code, r.Error)
	var rep compareReport
	require.NoError(t, json.Unmarshal(r.Data, &rep))
	want := map[string]map[string]float64{}
	for _, v := range []string{"v1", "v2"} {
		want[v] = map[string]float64{}
		for name, qq := range map[string]float64{"p50": 0.5, "p95": 0.95, "p99": 0.99} {
			s := p.instant(fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(%s_bucket{model_version=%q}[5m])))`, qq, metric, v), end)
			require.Len(t, s, 1)
			want[v][name] = value(t, s[0])
		}
	}
	for name := range want["v1"] {
		require.InDelta(t, want["v1"][name], rep.A.Quantiles[name], 1e-9, "v1 %s", name)
		require.InDelta(t, want["v2"][name], rep.B.Quantiles[name], 1e-9, "v2 %s", name)
		require.InDelta(t, want["v2"][name]-want["v1"][name], rep.Deltas[name], 1e-9, "delta %s", name)
	}
	require.Greater(t, rep.B.Quantiles["p95"], rep.A.Quantiles["p95"], "v2 is slower")
	require.Len(t, rep.A.CDF, 6)
	require.InDelta(t, 150.0/200, rep.A.CDF[2][1], 1e-9, "v1: 75%% at or under 0.5 s")
	require.InDelta(t, 50.0/200, rep.B.CDF[2][1], 1e-9, "v2: 25%% at or under 0.5 s")

	// The page.
	base := "http://" + p.addr
	requireBundle(t, base)
	ctx, b := openBrowserFor(t, chrome, 90*time.Second)
	page := base + "/compare?" + url.Values{"metric": {metric}, "label": {"model_version"}, "a": {"v1"}, "b": {"v2"},
		"from": {strconv.FormatInt(from.UnixMilli(), 10)}, "to": {strconv.FormatInt(end.UnixMilli(), 10)}}.Encode()
	openPage(t, ctx, page, "open /compare")
	byID := pagePanels(t, ctx)
	require.Equal(t, "ready", byID["compare-cdf"].State, "%+v", byID)
	require.Equal(t, "2", byID["compare-cdf"].Series, "both distributions drawn")
	require.Equal(t, "ready", byID["compare-quantiles"].State, "%+v", byID)
	var rows []struct{ Q, A, B string }
	evalJSON(t, ctx, `[...document.querySelectorAll('[data-panel="compare-quantiles"] tr[data-a]')].map(e => ({q: e.dataset.q, a: e.dataset.a, b: e.dataset.b}))`, &rows)
	require.Len(t, rows, 3)
	for _, row := range rows {
		a, err := strconv.ParseFloat(row.A, 64)
		require.NoError(t, err)
		bv, err := strconv.ParseFloat(row.B, 64)
		require.NoError(t, err)
		require.InDelta(t, want["v1"][row.Q], a, 1e-9, "page v1 %s", row.Q)
		require.InDelta(t, want["v2"][row.Q], bv, 1e-9, "page v2 %s", row.Q)
	}
	var text string
	evalJSON(t, ctx, `document.querySelector('[data-panel="compare-quantiles"]').innerText`, &text)
	require.Contains(t, text, "model_version=v2")
	checkBrowserClean(t, b, base)
	screenshot(t, ctx, "compare.png")
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}
