package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRemoteRead runs two appliances: A holds a series pushed with a
// timestamp two hours old, B reads A through remote_read (read_recent:
// true) and answers a query for A's series next to its own. Once A is
// stopped, B's query still answers 200 with its own series and a warning
// naming the remote; a reload that drops remote_read drops the warning.
func TestRemoteRead(t *testing.T) {
	ts := time.Now().Add(-2 * time.Hour).Truncate(time.Second)

	dirA := t.TempDir()
	a := start(t, writeConfig(t, dirA, "global: {scrape_interval: 15s}\n"), filepath.Join(dirA, "data"))
	code, body := a.post("/api/v1/import/prometheus", "text/plain",
		fmt.Appendf(nil, "rr_demo{box=\"a\"} 41 %d\n", ts.UnixMilli()), nil)
	require.Equal(t, http.StatusNoContent, code, body)

	readURL := a.url("/api/v1/read")
	dirB := t.TempDir()
	b := start(t, writeConfig(t, dirB, fmt.Sprintf("remote_read:\n  - url: %s\n    read_recent: true\n    remote_timeout: 5s\n", readURL)), filepath.Join(dirB, "data"))
	code, body = b.post("/api/v1/import/prometheus", "text/plain",
		fmt.Appendf(nil, "rr_demo{box=\"b\"} 7 %d\n", ts.UnixMilli()), nil)
	require.Equal(t, http.StatusNoContent, code, body)

	// Both series: B's own and A's, read through /api/v1/read.
	var ans rrAnswer
	eventually(t, 20*time.Second, "B answers both boxes", func() bool {
		ans = rrQuery(t, b, "rr_demo", ts)
		return slices.Equal(ans.boxes(), []string{"a=41", "b=7"})
	})
	require.Empty(t, ans.Warnings, "A is up: no warning")

	// A stops: B still answers 200 with its own series, and a warning
	// naming the remote.
	exit, _ := a.stop()
	require.Equal(t, 0, exit)
	ans = rrQuery(t, b, "rr_demo", ts)
	require.Equal(t, []string{"b=7"}, ans.boxes())
	require.Len(t, ans.Warnings, 1, "%v", ans.Warnings)
	t.Logf("warning with A down: %s", ans.Warnings[0])
	require.Contains(t, ans.Warnings[0], readURL)
	require.Contains(t, ans.Warnings[0], "remote_read")

	// A range query over the same time answers the same way.
	params := url.Values{"query": {"rr_demo"}, "start": {fmt.Sprint(ts.Add(-time.Minute).Unix())}, "end": {fmt.Sprint(ts.Unix())}, "step": {"30"}}
	resp, err := http.Get(b.url("/api/v1/query_range?" + params.Encode()))
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var r struct {
		Status   string   `json:"status"`
		Warnings []string `json:"warnings"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	require.Equal(t, "success", r.Status)
	require.Len(t, r.Warnings, 1, "%s", raw)
	require.Contains(t, r.Warnings[0], readURL)

	// A reload without remote_read applies at once: no more warning.
	writeConfig(t, dirB, "global: {scrape_interval: 15s}\n")
	code, body = b.post("/-/reload", "text/plain", nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	ans = rrQuery(t, b, "rr_demo", ts)
	require.Equal(t, []string{"b=7"}, ans.boxes())
	require.Empty(t, ans.Warnings)
}

// rrAnswer is an instant query's answer with its warnings.
type rrAnswer struct {
	Status string `json:"status"`
	Data   struct {
		Result []vectorSample `json:"result"`
	} `json:"data"`
	Warnings []string `json:"warnings"`
}

// boxes lists the answer as box=value, sorted.
func (a rrAnswer) boxes() []string {
	var out []string
	for _, s := range a.Data.Result {
		out = append(out, s.Metric["box"]+"="+fmt.Sprint(s.Value[1]))
	}
	slices.Sort(out)
	return out
}

// rrQuery runs an instant query on p at ts; the answer must be 200.
func rrQuery(t *testing.T, p *proc, q string, ts time.Time) rrAnswer {
	t.Helper()
	params := url.Values{"query": {q}, "time": {fmt.Sprint(ts.Unix())}}
	resp, err := http.Get(p.url("/api/v1/query?" + params.Encode()))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var a rrAnswer
	require.NoError(t, json.Unmarshal(raw, &a), "%s", raw)
	require.Equal(t, "success", a.Status)
	return a
}
