package demo

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/rules/rulefile"
)

func newTestSidecar(t *testing.T, logs *bytes.Buffer) (*Fleet, *Sidecar) {
	t.Helper()
	fopts := DefaultFleetOptions()
	fopts.BasePort = 0
	fopts.Instances = 2
	fleet, err := NewFleet(fopts)
	require.NoError(t, err)
	t.Cleanup(func() { fleet.Close() })
	clock := time.Unix(1764415800, 0)
	sc, err := NewSidecar(SidecarOptions{
		Fleet:  fleet,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Now:    func() time.Time { return clock },
	})
	require.NoError(t, err)
	t.Cleanup(func() { sc.ln.Close() })
	return fleet, sc
}

// TestSidecarGPU: the simulated GPU has DCGM exporter's families and
// labels (those of the fixture), and works harder when instances are slow.
func TestSidecarGPU(t *testing.T) {
	fleet, sc := newTestSidecar(t, &bytes.Buffer{})
	read := func() map[string]float64 {
		rec := httptest.NewRecorder()
		sc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(rec.Body)
		require.NoError(t, err)
		out := map[string]float64{}
		for name, f := range fams {
			require.Len(t, f.GetMetric(), 1, name)
			labels := map[string]string{}
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			require.Equal(t, "0", labels["gpu"], name)
			require.Equal(t, "NVIDIA H100 PCIe", labels["modelName"], name)
			out[name] = f.GetMetric()[0].GetGauge().GetValue()
		}
		return out
	}
	fixture, err := os.ReadFile(filepath.Join("..", "testdata", "dcgm-exporter.prom"))
	require.NoError(t, err)
	normal := read()
	for name := range normal {
		// The power limit is not a default counter; the appliance's own
		// readings (scrape/local) use DCGM's name for it.
		if name != "DCGM_FI_DEV_POWER_MGMT_LIMIT" {
			require.Contains(t, string(fixture), "\n"+name+"{", "%s is not a DCGM exporter family", name)
		}
	}
	require.Contains(t, normal, "DCGM_FI_DEV_GPU_UTIL")
	fleet.Instance(0).SetSlow(3)
	fleet.Instance(1).SetSlow(3)
	slow := read()
	require.Greater(t, slow["DCGM_FI_DEV_GPU_UTIL"], normal["DCGM_FI_DEV_GPU_UTIL"])
	require.Greater(t, slow["DCGM_FI_DEV_GPU_TEMP"], normal["DCGM_FI_DEV_GPU_TEMP"])
	require.LessOrEqual(t, slow["DCGM_FI_DEV_GPU_UTIL"], 100.0)
	require.Equal(t, 81559.0, slow["DCGM_FI_DEV_FB_USED"]+slow["DCGM_FI_DEV_FB_FREE"]+slow["DCGM_FI_DEV_FB_RESERVED"])
}

// TestSidecarReceiver: the receiver logs every alert of a webhook message
// and signals it.
func TestSidecarReceiver(t *testing.T) {
	var logs bytes.Buffer
	_, sc := newTestSidecar(t, &logs)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- sc.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-errc)
	}()
	notified := sc.Notified()
	body := `{"receiver":"demo-log","status":"firing","alerts":[
		{"status":"firing","labels":{"alertname":"DemoProbeSlow","severity":"P1"},"annotations":{"summary":"slow"}},
		{"status":"resolved","labels":{"alertname":"GPUHot","severity":"P1"},"annotations":{}}]}`
	resp, err := http.Post(sc.ReceiverURL(), "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	<-notified
	require.EqualValues(t, 2, sc.Received())
	require.Contains(t, logs.String(), `msg="demo receiver: would send" receiver=demo-log status=firing alertname=DemoProbeSlow severity=P1 summary=slow`)
	require.Contains(t, logs.String(), `status=resolved alertname=GPUHot`)

	resp, err = http.Post(sc.ReceiverURL(), "application/json", strings.NewReader("not json"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestShowcaseConfig: the showcase config loads as the appliance loads it,
// with the rule packs, one llm probe per instance, the GPU job and the
// logging receiver; the demo rule file parses.
func TestShowcaseConfig(t *testing.T) {
	fleet, sc := newTestSidecar(t, &bytes.Buffer{})
	rules, err := WriteShowcaseRules(t.TempDir())
	require.NoError(t, err)
	cfg, err := config.Load([]byte(ShowcaseConfig(ShowcaseOptions{Listen: "127.0.0.1:9999", Fleet: fleet, Sidecar: sc, RulesFile: rules})), "demo.yml")
	require.NoError(t, err)
	require.Equal(t, ShowcaseRulePacks, cfg.RulePacks)
	require.Equal(t, []string{rules}, cfg.RuleFiles)
	var jobs []string
	for _, s := range cfg.ScrapeConfigs {
		jobs = append(jobs, s.JobName)
	}
	require.Equal(t, []string{"appliance", "vllm", "dcgm"}, jobs)
	require.Len(t, cfg.Probes, 2)
	for i, p := range cfg.Probes {
		require.Equal(t, "llm", p.Kind)
		require.Equal(t, "http://"+fleet.Targets()[i]+"/v1/chat/completions", p.URL)
		require.Equal(t, ShowcaseTTFTThreshold, time.Duration(p.TTFTThreshold))
	}
	require.False(t, cfg.Autodetect.Enabled)
	require.False(t, cfg.Collectors.GPU)
	require.Len(t, cfg.Alerting.Receivers, 1)
	require.Equal(t, sc.ReceiverURL(), string(cfg.Alerting.Receivers[0].WebhookConfigs[0].URL))
	require.Len(t, cfg.SLOs, 2)
	require.Equal(t, ShowcaseLatencySLO, cfg.SLOs[0].Name)
	require.Equal(t, "latency", cfg.SLOs[0].Kind)
	require.Equal(t, "vllm:e2e_request_latency_seconds", cfg.SLOs[0].Histogram)
	require.Equal(t, ShowcaseLatencyThreshold.Seconds(), float64(cfg.SLOs[0].Threshold))
	require.Contains(t, requestTimeBuckets.le, ShowcaseLatencyThreshold.Seconds(), "the threshold must be a bucket bound")
	require.Equal(t, ShowcaseAvailabilitySLO, cfg.SLOs[1].Name)
	require.Equal(t, "availability", cfg.SLOs[1].Kind)
	require.Equal(t, cfg.Probes[0].Name, cfg.SLOs[1].Probe)
	require.Equal(t, []string{"demo-log"}, cfg.Reports.Weekly.Receivers)

	f, errs := rulefile.Parse([]byte(ShowcaseRules))
	require.Empty(t, errs)
	require.NotNil(t, f)
}

func TestFreeListen(t *testing.T) {
	got, err := FreeListen("127.0.0.1:0")
	require.NoError(t, err)
	require.NotEqual(t, "127.0.0.1:0", got)
	require.True(t, strings.HasPrefix(got, "127.0.0.1:"))
	got, err = FreeListen(":9090")
	require.NoError(t, err)
	require.Equal(t, ":9090", got)
	_, err = FreeListen("nonsense")
	require.Error(t, err)
}
