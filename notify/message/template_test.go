package message

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRender(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 12, 0, 0, time.UTC)
	m := &Message{
		Status: "firing", At: at, ExternalURL: "http://box:9090",
		CommonLabels: map[string]string{"alertname": "VLLMSlowTTFT", "severity": "P1", "job": "vllm"},
		Alerts: []Alert{
			{Status: "firing", Labels: map[string]string{"alertname": "VLLMSlowTTFT", "severity": "P1", "job": "vllm", "instance": "gpu1:8000"},
				Annotations: map[string]string{"summary": "P90 TTFT 2.4s > 0.6s", "description": "1 of 3 instances breach"},
				StartsAt:    at.Add(-7 * time.Minute), GeneratorURL: "http://box:9090/graph?g0.expr=x"},
			{Status: "resolved", Labels: map[string]string{"alertname": "VLLMSlowTTFT", "severity": "P1", "job": "vllm", "instance": "gpu2:8000"},
				Annotations: map[string]string{}, StartsAt: at.Add(-30 * time.Minute), EndsAt: at.Add(-2 * time.Minute)},
		},
	}
	require.NoError(t, Render(m))
	require.Equal(t, "[FIRING:1] P1 VLLMSlowTTFT (vllm)", m.Title)
	require.Equal(t, `🔥 **P90 TTFT 2.4s > 0.6s**
1 of 3 instances breach
- instance: gpu1:8000
- severity: P1
- since: 2026-03-02 10:05:00 UTC (for 7m0s)
- labels: alertname=VLLMSlowTTFT, instance=gpu1:8000, job=vllm, severity=P1
- source: http://box:9090/graph?g0.expr=x

✅ **VLLMSlowTTFT**
- instance: gpu2:8000
- severity: P1
- since: 2026-03-02 09:42:00 UTC, resolved 10:10:00 UTC
- labels: alertname=VLLMSlowTTFT, instance=gpu2:8000, job=vllm, severity=P1

Open in the appliance: http://box:9090/alerts`, m.Text)
	require.Contains(t, m.HTML, "<h2>[FIRING:1] P1 VLLMSlowTTFT (vllm)</h2>")

	m.Status = "resolved"
	m.Alerts = m.Alerts[1:]
	require.NoError(t, Render(m))
	require.Equal(t, "[RESOLVED] P1 VLLMSlowTTFT (vllm)", m.Title)
}

// TestTemplateFiles: Alertmanager's template files define templates that
// the title and text call, over Alertmanager's names.
func TestTemplateFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lab.tmpl"), []byte(`{{ define "lab.title" }}[{{ .Status | toUpper }}:{{ .Alerts.Firing | len }}] {{ .GroupLabels.alertname }} {{ .CommonLabels.severity }}{{ end }}
{{ define "lab.text" }}{{ range .Alerts.Resolved }}ok {{ .Labels.instance }} {{ end }}{{ .Receiver }} {{ .ExternalURL }}{{ end }}`), 0o644))
	tm, err := ParseTemplateFiles(`{{ template "lab.title" . }}`, `{{ template "lab.text" . }}`, []string{filepath.Join(dir, "*.tmpl")})
	require.NoError(t, err)
	m := &Message{
		Status: "firing", Receiver: "team", ExternalURL: "http://box:9090",
		GroupLabels: map[string]string{"alertname": "HostDown"}, CommonLabels: map[string]string{"severity": "critical"},
		Alerts: Alerts{{Status: "firing", Labels: map[string]string{"instance": "a"}}, {Status: "resolved", Labels: map[string]string{"instance": "b"}}},
	}
	require.NoError(t, tm.Render(m))
	require.Equal(t, "[FIRING:1] HostDown critical", m.Title)
	require.Equal(t, "ok b team http://box:9090", m.Text)

	_, err = ParseTemplateFiles("", "", []string{filepath.Join(dir, "[")})
	require.Error(t, err)
}
