package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
)

// visibilityRounds is how many new series TestNewSeriesVisibility pushes,
// one at a time (issue 15: "worst of 100").
const visibilityRounds = 100

// TestNewSeriesVisibility pushes a new series by remote write, then
// queries it, 100 times with a new series each time; each round also gives
// one long-lived series a new sample. Every push must be visible to the
// first query sent after the write was acknowledged (read your writes),
// new series and existing ones alike. The time from sending the write to
// the first answer that shows it is logged, worst of the rounds last
// (issue 15 asks for at most 1 s); the assertion is on behaviour, not on
// time.
func TestNewSeriesVisibility(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, "scrape_configs: []\n"), filepath.Join(dir, "data"))

	push := func(name string, ls map[string]string, at time.Time, v float64) {
		t.Helper()
		s := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}}}
		for k, val := range ls {
			s.Labels = append(s.Labels, prompb.Label{Name: k, Value: val})
		}
		s.Samples = []prompb.Sample{{Timestamp: at.UnixMilli(), Value: v}}
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{s}}
		code, body := p.post("/api/v1/write", "application/x-protobuf", remoteWriteBody(t, req), rwHeaders)
		require.Equal(t, http.StatusNoContent, code, body)
	}
	// found reports whether q at `at` answers exactly one sample of value v.
	found := func(q string, at time.Time, v float64) bool {
		t.Helper()
		res := p.instant(q, at)
		return len(res) == 1 && value(t, res[0]) == v
	}

	var worst time.Duration
	var late []string
	base := time.Now().Truncate(time.Second)
	for i := range visibilityRounds {
		// Sample times move forward, so each is the newest of its series
		// and within the query's lookback.
		at := base.Add(time.Duration(i) * 10 * time.Millisecond)
		newQ := fmt.Sprintf(`visibility_probe{round="%d"}`, i)
		oldQ := `visibility_existing`
		sent := time.Now()
		push("visibility_probe", map[string]string{"round": fmt.Sprint(i)}, at, float64(i))
		push("visibility_existing", nil, at, float64(i))

		first := found(newQ, at, float64(i)) && found(oldQ, at, float64(i))
		if !first {
			late = append(late, fmt.Sprint(i))
		}
		// Measure until visible; the guard only keeps a broken build
		// from hanging the run.
		deadline := sent.Add(60 * time.Second)
		for !(found(newQ, at, float64(i)) && found(oldQ, at, float64(i))) {
			require.True(t, time.Now().Before(deadline), "round %d: pushed samples not visible after 60 s", i)
			time.Sleep(5 * time.Millisecond)
		}
		worst = max(worst, time.Since(sent))
	}
	t.Logf("visibility: worst of %d rounds from sending the write to the first answer showing it: %s", visibilityRounds, worst)
	require.Empty(t, late, "rounds whose samples the first query after the acknowledged write did not see")
}

// TestRulesSeeNewSeriesAtOnce: the first rule evaluation that starts after
// a remote write was acknowledged sees the new series it brought (issue
// 15: "queryable (API and rules)"). Rounds of a new series each; the
// barrier is the group's lastEvaluation passing the acknowledgement, not
// a wait.
func TestRulesSeeNewSeriesAtOnce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "probe.rules.yml"), []byte(`groups:
  - name: visibility
    interval: 1s
    warmup: 0s
    rules:
      - alert: VisibilityProbe
        expr: visibility_rule_probe > 0
        labels:
          severity: P2
`), 0o644))
	cfg := writeConfig(t, dir, "global: {evaluation_interval: 1s}\nscrape_configs: []\nrule_files: [probe.rules.yml]\n")
	p := start(t, cfg, filepath.Join(dir, "data"))

	lastEvaluation := func() time.Time {
		t.Helper()
		code, r := p.get("/api/v1/rules", nil)
		require.Equal(t, http.StatusOK, code, r.Error)
		var data struct {
			Groups []struct {
				Name           string    `json:"name"`
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"groups"`
		}
		require.NoError(t, json.Unmarshal(r.Data, &data))
		for _, g := range data.Groups {
			if g.Name == "visibility" {
				return g.LastEvaluation
			}
		}
		t.Fatalf("no rule group visibility in /api/v1/rules")
		return time.Time{}
	}
	const rounds = 5
	for i := range rounds {
		// lastEvaluation is when an evaluation started; it queries at its
		// scheduled tick, a little earlier. A sample 2 s old is in every
		// such query's lookback however late the evaluation starts.
		at := time.Now().Add(-2 * time.Second)
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels:  []prompb.Label{{Name: "__name__", Value: "visibility_rule_probe"}, {Name: "round", Value: fmt.Sprint(i)}},
			Samples: []prompb.Sample{{Timestamp: at.UnixMilli(), Value: 1}},
		}}}
		code, body := p.post("/api/v1/write", "application/x-protobuf", remoteWriteBody(t, req), rwHeaders)
		require.Equal(t, http.StatusNoContent, code, body)
		acked := time.Now()
		// An evaluation stamped after the acknowledgement started after it.
		eventually(t, 30*time.Second, "an evaluation after the write", func() bool {
			return lastEvaluation().After(acked)
		})
		active := map[string]bool{}
		for _, a := range p.alerts("VisibilityProbe") {
			active[a.Labels["round"]] = true
		}
		require.True(t, active[fmt.Sprint(i)], "round %d: the first evaluation after the write did not see the new series", i)
	}
}
