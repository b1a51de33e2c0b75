package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// explainReport is what the test reads of GET /api/v1/appliance/explain.
type explainReport struct {
	Status  string
	Summary string
	Grew    string
	Phases  []struct {
		Name                 string
		Before, After, Share *float64
	}
	Signals []struct {
		ID     string
		Moved  bool
		Before *float64
		After  *float64
		Text   string
		Link   string
	}
	Missing   []string
	P95Series [][2]*float64 `json:"p95_series"`
	Before    struct{ From, To float64 }
	After     struct{ From, To float64 }
	P95       struct{ Before, After *float64 }
}

// controlDemo posts a demo control to one instance.
func controlDemo(t *testing.T, instance, body string) {
	t.Helper()
	resp, err := http.Post("http://"+instance+"/demo/control", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestExplainScenarios runs `appliance demo` and makes one instance's
// queue grow ({"queue": 23}) and another's decode slow ({"decode_slow":
// 4}). For each, the test waits until the instance's e2e P95 (rate over
// 1 m, as the dashboard draws it) is 2× its level of the two minutes
// before (the mean of the P95 series), then asks the
// explain API once, at that moment (the first evaluation after the rise
// is visible): it must name the phase that grew
// (queue, then decode) with most of the rise, and for the queue the two
// top-ranked signals that moved are the requests waiting and the KV
// cache. The breakdown API splits the same service into its phases.
func TestExplainScenarios(t *testing.T) {
	p := startDemo(t, 2)
	m := regexp.MustCompile(`demo: 2 simulated vLLM instances at (\S+), (\S+)\n`).FindStringSubmatch(p.Output())
	require.NotNil(t, m, p.Output())
	queued, decoding := m[1], m[2]

	var services []struct{ Job, Model string }
	eventually(t, 60*time.Second, "the services", func() bool {
		code, r := p.get("/api/v1/appliance/services", nil)
		return code == http.StatusOK && json.Unmarshal(r.Data, &services) == nil && len(services) == 2
	})
	job, model := services[0].Job, services[0].Model
	p95Expr := func(instance string) string {
		return fmt.Sprintf(`histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{job=%q,model_name=%q,instance=%q}[1m])))`, job, model, instance)
	}
	one := func(expr string) float64 {
		v := p.instant(expr, time.Time{})
		if len(v) != 1 {
			return math.NaN()
		}
		return value(t, v[0])
	}
	p95 := func(instance string) float64 { return one(p95Expr(instance)) }
	// The level before: the P95's mean over the last two minutes (one
	// point in a spike is no level).
	level := func(instance string) float64 { return one(`avg_over_time((` + p95Expr(instance) + `)[2m:15s])`) }
	// A baseline: two minutes of scrapes, so the P95 series has a level.
	eventually(t, 4*time.Minute, "two minutes of baseline", func() bool {
		v := p.instant(fmt.Sprintf(`count_over_time(vllm:e2e_request_latency_seconds_count{model_name=%q,instance=%q}[3m])`, model, queued), time.Time{})
		return len(v) == 1 && value(t, v[0]) >= 24
	})

	explainNow := func(instance string) explainReport {
		code, r := p.get("/api/v1/appliance/explain", url.Values{"job": {job}, "model": {model}, "instance": {instance}})
		require.Equal(t, http.StatusOK, code, r.Error)
		var rep explainReport
		require.NoError(t, json.Unmarshal(r.Data, &rep))
		t.Logf("explain %s: %s", instance, rep.Summary)
		var tail []string
		for _, pt := range rep.P95Series[max(0, len(rep.P95Series)-16):] {
			if pt[0] != nil && pt[1] != nil {
				tail = append(tail, fmt.Sprintf("%.0f:%.3f", *pt[0], *pt[1]))
			}
		}
		t.Logf("explain %s: status %s, before %v, after %v, P95 %g → %g, the P95 series' last points %s", instance, rep.Status, rep.Before, rep.After,
			deref(rep.P95.Before), deref(rep.P95.After), strings.Join(tail, " "))
		return rep
	}
	rise := func(instance, control string) explainReport {
		base := level(instance)
		require.False(t, math.IsNaN(base), "baseline P95 of %s", instance)
		// Before the control the demo's own load spikes may show as a
		// rise; the answer is logged, not checked. A spike in progress
		// (up to about 1.4× the level) would pass for the control's rise,
		// so the control waits for the P95 to be back near its level,
		// and the rise it waits for is 2× (the controls give about 3×).
		explainNow(instance)
		eventually(t, 2*time.Minute, "the P95 of "+instance+" near its level", func() bool {
			return p95(instance) <= 1.2*base
		})
		controlDemo(t, instance, control)
		eventually(t, 2*time.Minute, "the P95 rise visible on "+instance, func() bool {
			return p95(instance) >= 2*base
		})
		// The first evaluation after the rise is visible must report it:
		// explain's P95 series ends at its now to the millisecond, so it
		// holds the scrape the check above saw.
		rep := explainNow(instance)
		require.Equal(t, "rise", rep.Status, "the first answer after the P95 rise was visible: %s", rep.Summary)
		return rep
	}

	rep := rise(queued, `{"queue": 23}`)
	require.Equal(t, "rise", rep.Status, rep.Summary)
	require.Equal(t, "queue", rep.Grew, rep.Summary)
	require.Equal(t, "queue", rep.Phases[0].Name)
	require.NotNil(t, rep.Phases[0].Share)
	require.Greater(t, *rep.Phases[0].Share, 0.5, rep.Summary)
	var moved []string
	for _, s := range rep.Signals {
		if s.Moved {
			moved = append(moved, s.ID)
			require.True(t, strings.HasPrefix(s.Link, "/explore?expr="), s.Link)
		}
	}
	require.GreaterOrEqual(t, len(moved), 2, rep.Summary)
	// The backlog and the full KV cache lead. Preemptions may rank among
	// them: the demo preempts at random once the cache is over 90%, as
	// vLLM does when it is full, and their score is close to the cache's
	// (5 at 0.25 preemptions/s against 4.6), so the order of the three is
	// not the scenario's.
	require.Subset(t, moved[:min(3, len(moved))], []string{"waiting", "kv_cache"}, rep.Summary)
	require.Subset(t, []string{"waiting", "kv_cache", "preemptions"}, moved[:2], rep.Summary)
	require.Regexp(t, `^P95 .* → .* since \d\d:\d\d UTC; queue time accounts for \d+% of the rise`, rep.Summary)
	require.Contains(t, rep.Summary, "requests waiting")
	require.Contains(t, rep.Summary, "KV cache")

	rep = rise(decoding, `{"decode_slow": 4}`)
	require.Equal(t, "rise", rep.Status, rep.Summary)
	require.Equal(t, "decode", rep.Grew, rep.Summary)
	require.Greater(t, *rep.Phases[0].Share, 0.5, rep.Summary)
	require.Contains(t, rep.Summary, "decode time accounts for")

	// The breakdown of the queued instance: the three phases and the
	// server's total, whose means add up to about the total's.
	now := time.Now()
	code, r := p.get("/api/v1/appliance/breakdown", url.Values{"job": {job}, "model": {model}, "instance": {queued},
		"from": {strconv.FormatInt(now.Add(-5*time.Minute).Unix(), 10)}, "to": {strconv.FormatInt(now.Unix(), 10)}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var bd struct {
		Note   string
		Phases []struct {
			Name      string
			Mean      [][2]*float64
			RangeMean *float64 `json:"range_mean"`
			RangeP95  *float64 `json:"range_p95"`
		}
		Total struct {
			RangeMean *float64 `json:"range_mean"`
		}
	}
	require.NoError(t, json.Unmarshal(r.Data, &bd))
	require.Contains(t, bd.Note, "Means add up, percentiles do not")
	require.Len(t, bd.Phases, 3)
	sum := 0.0
	for i, name := range []string{"queue", "prefill", "decode"} {
		require.Equal(t, name, bd.Phases[i].Name)
		require.NotEmpty(t, bd.Phases[i].Mean)
		require.NotNil(t, bd.Phases[i].RangeMean)
		require.NotNil(t, bd.Phases[i].RangeP95)
		sum += *bd.Phases[i].RangeMean
	}
	require.NotNil(t, bd.Total.RangeMean)
	require.InDelta(t, *bd.Total.RangeMean, sum, 0.05**bd.Total.RangeMean, "phase means add up to the server's")

	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}

func deref(f *float64) float64 {
	if f == nil {
		return math.NaN()
	}
	return *f
}
