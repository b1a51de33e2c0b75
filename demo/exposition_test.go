package demo

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	dto "github.com/prometheus/client_model/go"
)

const fixture = "../testdata/vllm.prom"

func readFixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(fixture)
	require.NoError(t, err, "the vLLM fixture is part of the repository")
	return string(b)
}

func TestAppendPyFloat(t *testing.T) {
	f := func(v float64, want string) {
		t.Helper()
		require.Equal(t, want, string(appendPyFloat(nil, v)), "%v", v)
	}
	f(0, "0.0")
	f(3, "3.0")
	f(2053, "2053.0")
	f(999999, "999999.0")
	f(1e6, "1e+06")
	f(1048576, "1.048576e+06")
	f(2172179, "2.172179e+06")
	f(2.1921529856e9, "2.1921529856e+09")
	f(1.17061632e10, "1.17061632e+010")
	f(1.76439308231e9, "1.76439308231e+09")
	f(1.7643930841799998e9, "1.7643930841799998e+09")
	f(1312.47, "1312.47")
	f(0.015832263585793753, "0.015832263585793753")
	f(299.78409115298484, "299.78409115298484")
	f(0.0001, "0.0001")
	f(0.00001, "1e-05")
	f(1.5e-7, "1.5e-07")
	f(1e16, "1e+16")
	f(-2.5, "-2.5")
	f(-3, "-3.0")
}

// Every value in the fixture, parsed and printed again, gives the same text.
func TestAppendPyFloatRoundTripsFixture(t *testing.T) {
	sc := bufio.NewScanner(strings.NewReader(readFixture(t)))
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		text := line[strings.LastIndexByte(line, ' ')+1:]
		v, err := strconv.ParseFloat(text, 64)
		require.NoError(t, err, line)
		require.Equal(t, text, string(appendPyFloat(nil, v)), line)
		n++
	}
	require.Greater(t, n, 400)
}

// The page has the fixture's families, with the same TYPE, HELP, label
// names and bucket boundaries.
func TestMetricsMatchFixture(t *testing.T) {
	want := parseText(t, readFixture(t))
	f, clock := startFleet(t, nil)
	clock.Advance(10 * time.Minute)
	// One real request of each kind so every http_* child shape exists.
	code, _ := httpPost(t, "http://"+f.Targets()[0]+"/v1/chat/completions", `{"max_tokens":2}`)
	require.Equal(t, 200, code)
	httpGet(t, "http://"+f.Targets()[0]+"/nope")
	got := scrape(t, f, 0)

	require.ElementsMatch(t, slices.Collect(mapKeys(want)), slices.Collect(mapKeys(got)),
		"families differ from the fixture (with _created families, as in the fixture)")
	for name, w := range want {
		g := got[name]
		require.Equal(t, w.GetType(), g.GetType(), name)
		require.Equal(t, w.GetHelp(), g.GetHelp(), name)
		require.Equal(t, labelNames(w.GetMetric()[0]), labelNames(g.GetMetric()[0]), name)
		if w.GetType() == dto.MetricType_HISTOGRAM {
			require.Equal(t, bounds(w.GetMetric()[0]), bounds(g.GetMetric()[0]), name)
		}
		if strings.HasPrefix(name, "vllm:") && name != "vllm:cache_config_info" {
			require.Len(t, g.GetMetric(), len(w.GetMetric())*2, "%s: one child per model", name)
		}
	}
}

func mapKeys(m map[string]*dto.MetricFamily) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, lp := range m.GetLabel() {
		out = append(out, lp.GetName())
	}
	return out
}

func bounds(m *dto.Metric) []float64 {
	var out []float64
	for _, b := range m.GetHistogram().GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	return out
}

// Series per instance: about 700 with two models, about half with one, so
// ~140 two-model instances give the benchmark's 100,000 active series.
func TestSeriesCount(t *testing.T) {
	for _, tc := range []struct {
		models   []string
		min, max int
	}{
		{DefaultModels, 650, 900},
		{DefaultModels[:1], 330, 480},
	} {
		f, clock := startFleet(t, func(o *FleetOptions) { o.Models = tc.models })
		clock.Advance(time.Minute)
		code, body, _ := httpGet(t, "http://"+f.Targets()[0]+"/metrics")
		require.Equal(t, 200, code)
		samples := 0
		for _, line := range strings.Split(body, "\n") {
			if line != "" && line[0] != '#' {
				samples++
			}
		}
		require.Equal(t, samples, f.Instance(0).SeriesCount())
		require.GreaterOrEqual(t, samples, tc.min)
		require.LessOrEqual(t, samples, tc.max)
		t.Logf("%d model(s): %d series, %d bytes", len(tc.models), samples, len(body))
	}
}
