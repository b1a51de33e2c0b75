package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/bench/harness"
)

// TestFederateScrapedByPrometheus: a real Prometheus scrapes the
// appliance's /federate with honor_labels, and its instant query answers
// what the appliance's own instant query answers, series for series,
// with the appliance's external label added.
func TestFederateScrapedByPrometheus(t *testing.T) {
	prom := externalBinary(t, "github.com/prometheus/prometheus/cmd/prometheus", harness.PrometheusVersion)

	dir := t.TempDir()
	cfg := writeConfig(t, dir, "global:\n  external_labels: {box: gpu-01}\n")
	app := start(t, cfg, filepath.Join(dir, "data"))

	// Three families, two samples each per series: the later one is what
	// federation serves.
	at := time.Now().Add(-30 * time.Second).Truncate(time.Second)
	var body strings.Builder
	for i := range 10 {
		for j, dt := range []time.Duration{-15 * time.Second, 0} {
			ts := at.Add(dt).UnixMilli()
			fmt.Fprintf(&body, "fed_requests_total{job=\"vllm\",instance=\"10.0.0.%d:8000\",model=\"m%d\"} %d %d\n", i, i%3, 1000*i+j, ts)
			fmt.Fprintf(&body, "fed_gpu_util{job=\"dcgm\",instance=\"10.0.1.%d:9400\",gpu=\"%d\"} %g %d\n", i, i%8, float64(i)/7+float64(j), ts)
		}
		fmt.Fprintf(&body, "fed_up{job=\"edge\",zone=\"z%d\"} 1 %d\n", i, at.UnixMilli())
	}
	code, msg := app.post("/api/v1/import/prometheus", "text/plain", []byte(body.String()), nil)
	require.Equal(t, http.StatusNoContent, code, msg)

	// Prometheus' error for no selector.
	resp, err := http.Get(app.url("/federate"))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(b), "no match[] parameter provided")

	// New series become searchable a moment after their import.
	eventually(t, 30*time.Second, "the appliance answers every imported series", func() bool {
		v := app.instant(`count({__name__=~"fed_.*"})`, at.Add(time.Second))
		return len(v) == 1 && value(t, v[0]) == 30
	})

	promAddr := freeAddr(t)
	promCfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: federate
    honor_labels: true
    metrics_path: /federate
    params:
      'match[]': ['{__name__=~"fed_.*"}']
    static_configs:
      - targets: [%q]
`, app.addr)), 0o644))
	p := startExternal(t, prom, promAddr, "/-/ready",
		"--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prom"),
		"--web.listen-address="+promAddr)
	promProc := &proc{t: t, addr: p.addr}

	const want = 30
	eventually(t, 60*time.Second, "Prometheus holds every federated series", func() bool {
		v := promProc.instant(`count({__name__=~"fed_.*"})`, at.Add(time.Second))
		return len(v) == 1 && value(t, v[0]) == want
	})

	q := `{__name__=~"fed_.*"}`
	qt := at.Add(time.Second)
	own := app.instant(q, qt)
	got := promProc.instant(q, qt)
	require.Len(t, own, want)
	require.Len(t, got, want)
	ownByKey := map[string]float64{}
	for _, s := range own {
		ownByKey[seriesKey(s.Metric)] = value(t, s)
	}
	for _, s := range got {
		require.Equal(t, "gpu-01", s.Metric["box"], "external label on %v", s.Metric)
		delete(s.Metric, "box")
		if s.Metric["instance"] == "" {
			delete(s.Metric, "instance")
		}
		k := seriesKey(s.Metric)
		v, ok := ownByKey[k]
		require.True(t, ok, "Prometheus has a series the appliance has not: %s", k)
		require.Equal(t, v, value(t, s), "series %s", k)
	}
	// honor_labels kept the series' own job, not the scrape job's.
	require.Len(t, promProc.instant(`fed_requests_total{job="vllm"}`, qt), 10)
}

// exported is an export body read back: samples per series.
type exported map[string][][2]float64

// readExport parses JSON lines, joining the lines of one series.
func readExport(t *testing.T, body []byte) (exported, int) {
	t.Helper()
	out := exported{}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		lines++
		var l struct {
			Metric     map[string]string `json:"metric"`
			Values     []any             `json:"values"`
			Timestamps []int64           `json:"timestamps"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), "line %s", sc.Text())
		require.Len(t, l.Values, len(l.Timestamps))
		k := seriesKey(l.Metric)
		for i, v := range l.Values {
			f, ok := v.(float64)
			require.True(t, ok, "value %v", v)
			out[k] = append(out[k], [2]float64{float64(l.Timestamps[i]), f})
		}
	}
	require.NoError(t, sc.Err())
	for k := range out {
		slices.SortFunc(out[k], func(a, b [2]float64) int { return int(a[0] - b[0]) })
	}
	return out, lines
}

func httpExport(t *testing.T, base string, params url.Values) []byte {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/export?" + params.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return b
}

// TestExportImportRoundTrip: what /api/v1/export writes, /api/v1/import
// of a fresh appliance and of VictoriaMetrics single take, and each
// exports back every sample, per series, with the same values.
func TestExportImportRoundTrip(t *testing.T) {
	vm := externalBinary(t, "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics", harness.VictoriaMetricsVersion)

	dir := t.TempDir()
	src := start(t, writeConfig(t, filepath.Join(dir), ""), filepath.Join(dir, "src"))

	// 40 series of 120 samples each, 15s apart, over the last half hour.
	const series, perSeries = 40, 120
	first := time.Now().Add(-31 * time.Minute).Truncate(time.Second)
	var body strings.Builder
	for i := range series {
		for j := range perSeries {
			v := float64(i*perSeries+j) * 1.25
			if i%4 == 0 {
				// Fractions and negatives, to 10 significant digits: the storage
				// (VictoriaMetrics' decimal encoding) keeps 12 exactly.
				v = math.Round(math.Sin(float64(j))*1e9) / 1e3
			}
			fmt.Fprintf(&body, "rt_metric_%d{job=\"j%d\",instance=\"h%d:80\",quote=\"a\\\"b\"} %s %d\n",
				i%5, i%3, i, formatFloat(v), first.Add(time.Duration(j)*15*time.Second).UnixMilli())
		}
	}
	code, msg := src.post("/api/v1/import/prometheus", "text/plain", []byte(body.String()), nil)
	require.Equal(t, http.StatusNoContent, code, msg)

	params := url.Values{"match[]": {`{__name__=~"rt_.*"}`}}
	// New series become searchable a moment after their import.
	var (
		exp   []byte
		want  exported
		lines int
	)
	eventually(t, 30*time.Second, "every imported series exported", func() bool {
		exp = httpExport(t, src.url(""), params)
		want, lines = readExport(t, exp)
		return len(want) == series
	})
	require.Len(t, want, series)
	require.Equal(t, series, lines, "one line per series")
	for k, s := range want {
		require.Len(t, s, perSeries, "series %s", k)
	}
	// max_rows_per_line splits each series over lines of at most 50.
	split := httpExport(t, src.url(""), url.Values{"match[]": params["match[]"], "max_rows_per_line": {"50"}})
	splitRead, splitLines := readExport(t, split)
	require.Equal(t, series*3, splitLines)
	require.Equal(t, want, splitRead)
	// start and end bound the samples (inclusive).
	window := httpExport(t, src.url(""), url.Values{"match[]": params["match[]"],
		"start": {fmt.Sprint(first.Add(15 * time.Second).Unix())}, "end": {first.Add(30 * time.Second).Format(time.RFC3339)}})
	windowRead, _ := readExport(t, window)
	for k, s := range windowRead {
		require.Len(t, s, 2, "series %s", k)
	}

	// Into a fresh appliance, the split body: lines of one series join.
	dst := start(t, writeConfig(t, filepath.Join(dir), ""), filepath.Join(dir, "dst"))
	code, msg = dst.post("/api/v1/import", "application/json", split, nil)
	require.Equal(t, http.StatusNoContent, code, msg)
	var back exported
	eventually(t, 30*time.Second, "the fresh appliance exports every series", func() bool {
		back, _ = readExport(t, httpExport(t, dst.url(""), params))
		return len(back) == series
	})
	require.Equal(t, want, back, "appliance → appliance")

	// Into VictoriaMetrics single, and out of it again.
	vmAddr := freeAddr(t)
	startExternal(t, vm, vmAddr, "/health",
		"-storageDataPath="+filepath.Join(dir, "vm"), "-httpListenAddr="+vmAddr,
		"-retentionPeriod=1y", "-search.disableCache")
	req, err := http.NewRequest(http.MethodPost, "http://"+vmAddr+"/api/v1/import", bytes.NewReader(exp))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
	resp, err = http.Get("http://" + vmAddr + "/internal/force_flush")
	require.NoError(t, err)
	resp.Body.Close()
	var fromVM exported
	eventually(t, 30*time.Second, "VictoriaMetrics exports every imported sample", func() bool {
		fromVM, _ = readExport(t, httpExport(t, "http://"+vmAddr, params))
		n := 0
		for _, s := range fromVM {
			n += len(s)
		}
		return n == series*perSeries
	})
	require.Equal(t, want, fromVM, "appliance → VictoriaMetrics")

	// And VictoriaMetrics' export imports into the appliance as it is.
	vmBody := httpExport(t, "http://"+vmAddr, params)
	third := start(t, writeConfig(t, filepath.Join(dir), ""), filepath.Join(dir, "third"))
	code, msg = third.post("/api/v1/import", "application/json", vmBody, nil)
	require.Equal(t, http.StatusNoContent, code, msg)
	var fromThird exported
	eventually(t, 30*time.Second, "the third appliance exports every series", func() bool {
		fromThird, _ = readExport(t, httpExport(t, third.url(""), params))
		return len(fromThird) == series
	})
	require.Equal(t, want, fromThird, "VictoriaMetrics → appliance")
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
