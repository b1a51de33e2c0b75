package notify

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/message"
)

// TestIntegrationTemplates: a Slack config's title and text (as in an
// alertmanager.yml) render its messages with the template files; the
// other integrations keep the section's templates.
func TestIntegrationTemplates(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "slack.tmpl"), []byte(`{{ define "slack.title" }}[{{ .Status | toUpper }}:{{ .Alerts.Firing | len }}] {{ .CommonLabels.alertname }}{{ end }}`), 0o644))
	path := filepath.Join(dir, "appliance.yml")
	require.NoError(t, os.WriteFile(path, []byte(`
alerting:
  templates: ['*.tmpl']
  route: {receiver: team}
  receivers:
    - name: team
      slack_configs:
        - api_url: https://hooks.slack.com/services/T/B/X
          title: '{{ template "slack.title" . }}'
          text: '{{ range .Alerts }}{{ .Annotations.summary }}{{ end }}'
      webhook_configs:
        - url: http://hook.lab/x
`), 0o644))
	cfg, err := config.LoadFile(path)
	require.NoError(t, err)
	recv, err := buildReceivers(cfg.Alerting, nil, time.Now)
	require.NoError(t, err)
	ints := recv["team"]
	require.Len(t, ints, 2)
	require.Nil(t, ints[0].templates, "the webhook keeps the section's templates")
	require.NotNil(t, ints[1].templates)
	m := &message.Message{Status: "firing", CommonLabels: map[string]string{"alertname": "HostDown"},
		Alerts: message.Alerts{{Status: "firing", Annotations: map[string]string{"summary": "db1 is down"}}}}
	require.NoError(t, ints[1].templates.Render(m))
	require.Equal(t, "[FIRING:1] HostDown", m.Title)
	require.Equal(t, "db1 is down", m.Text)
}
