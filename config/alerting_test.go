package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// alertingBadFiles maps every testdata/alerting/*.bad.yml to the errors
// loading it must report.
var alertingBadFiles = map[string][]string{
	"unknown-receiver.bad.yml":   {`testdata/alerting/unknown-receiver.bad.yml:3: route receiver "chat" is not defined in receivers`},
	"unknown-key.bad.yml":        {`testdata/alerting/unknown-key.bad.yml:6: unknown field "urll"`},
	"bad-matcher.bad.yml":        {`testdata/alerting/bad-matcher.bad.yml:5: invalid matcher "severity==\"P1\"": matcher value contains unescaped double quote: ="P1"`},
	"digest-at.bad.yml":          {`testdata/alerting/digest-at.bad.yml:3: digest time "9am" is not HH:MM (24-hour clock, e.g. "09:00")`},
	"digest-tz.bad.yml":          {`testdata/alerting/digest-tz.bad.yml:3: unknown digest timezone "Mars/Olympus": use an IANA name such as "Europe/Berlin"`},
	"unknown-interval.bad.yml":   {`testdata/alerting/unknown-interval.bad.yml:6: time interval "weekend" is not defined in time_intervals`},
	"secret-url.bad.yml":         {`testdata/alerting/secret-url.bad.yml:4: dingtalk_configs webhook_url is not an absolute http or https URL (the value is not shown: it may hold a token)`},
	"duplicate-receiver.bad.yml": {`testdata/alerting/duplicate-receiver.bad.yml:3: receiver "chat" is defined twice`},
	"severity-map.bad.yml":       {`testdata/alerting/severity-map.bad.yml:4: severity_map "sev1": "urgent" is not a priority; want P0, P1 or P2`},
	"bad-time.bad.yml":           {`testdata/alerting/bad-time.bad.yml:5: couldn't parse timestamp 25:00, invalid format`},
}

func TestAlertingBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/alerting/*.bad.yml")
	require.NoError(t, err)
	require.Len(t, files, len(alertingBadFiles), "every testdata/alerting/*.bad.yml needs an entry and vice versa")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, ok := alertingBadFiles[filepath.Base(f)]
			require.True(t, ok)
			_, err := LoadFile(f)
			require.Error(t, err)
			var got []string
			for _, e := range flattenErrors(err) {
				var ce *Error
				require.True(t, errors.As(e, &ce), "%T %v", e, e)
				got = append(got, e.Error())
			}
			require.Equal(t, want, got)
			require.NotContains(t, err.Error(), "s3cr3t", "no secrets in errors")
		})
	}
}

func TestAlertingGoodFile(t *testing.T) {
	cfg, err := LoadFile("testdata/alerting/good.yml")
	require.NoError(t, err)
	a := cfg.Alerting
	require.Equal(t, "chat", a.Route.Receiver)
	require.Len(t, a.Route.Routes, 4)
	require.True(t, a.Route.Routes[0].Continue)
	require.Equal(t, model.Duration(10*time.Second), *a.Route.Routes[0].GroupWait)
	require.True(t, a.Route.Routes[3].Digest)
	require.True(t, a.Route.Routes[2].Matchers.Matches(model.LabelSet{"severity": "P1", "job": "tgi"}))
	require.False(t, a.Route.Routes[2].Matchers.Matches(model.LabelSet{"severity": "P1", "job": "triton"}))
	require.Len(t, a.TimeIntervals, 2)
	loc, err := a.Digest.Location()
	require.NoError(t, err)
	require.Equal(t, "Asia/Shanghai", loc.String())
	require.Equal(t, model.Duration(12*time.Hour), a.Outbox.GiveUpAfter)
	chat := a.Receiver("chat")
	require.NotNil(t, chat)
	require.Len(t, chat.DingTalkConfigs, 1)
	require.False(t, chat.AlertmanagerConfigs[0].Resolved())
	require.True(t, chat.WebhookConfigs[0].Resolved())
	require.Equal(t, "POST", a.Receiver("pager").VoiceConfigs[0].Method)

	// Secrets never show in the config the API prints.
	s := cfg.String()
	for _, secret := range []string{"ding-token", "SECding-secret", "wecom-key", "feishu-hook", "feishu-secret", "XXXX", "mail-password", "sms-token", "bridge.local"} {
		require.NotContains(t, s, secret)
	}
	require.Contains(t, s, "business-hours")
}

func TestAlertingDefaults(t *testing.T) {
	cfg, err := Load([]byte("alerting: {}\n"), "empty.yml")
	require.NoError(t, err)
	a := cfg.Alerting
	require.Len(t, a.Route.Routes, 3)
	p0, p1, p2 := a.Route.Routes[0], a.Route.Routes[1], a.Route.Routes[2]
	require.Equal(t, "pager", p0.Receiver)
	require.Equal(t, model.Duration(10*time.Second), *p0.GroupWait)
	require.Equal(t, model.Duration(30*time.Minute), *p0.RepeatInterval)
	require.Equal(t, "chat", p1.Receiver)
	require.Equal(t, model.Duration(30*time.Second), *p1.GroupWait)
	require.Equal(t, model.Duration(4*time.Hour), *p1.RepeatInterval)
	require.True(t, p2.Digest)
	require.Len(t, a.InhibitRules, 1)
	ir := a.InhibitRules[0]
	require.True(t, ir.SourceMatchers.Matches(model.LabelSet{"priority": "P0", "job": "vllm"}))
	require.False(t, ir.SourceMatchers.Matches(model.LabelSet{"priority": "P0"}), "alerts without job are left alone")
	require.True(t, ir.TargetMatchers.Matches(model.LabelSet{"priority": "P2", "job": "vllm"}))
	require.Equal(t, []string{"job"}, ir.Equal)
	require.Equal(t, []string{"chat"}, a.Digest.DigestReceivers())
	require.Equal(t, "09:00", a.Digest.At)

	// The embedded default config (never decoded) gets the same.
	r := AlertingConfig{}.Resolved()
	require.Len(t, r.Route.Routes, 3)
	require.Equal(t, DefaultOutboxConfig, r.Outbox)
	require.True(t, strings.HasPrefix(DefaultRoute().Routes[2].Matchers[0].String(), "priority="))
}

func TestSeverityMap(t *testing.T) {
	cfg, err := Load([]byte("alerting:\n  severity_map: {sev1: P0, warning: P2}\n  default_severity: P2\nrules: {warmup: 2m}\n"), "s.yml")
	require.NoError(t, err)
	s := cfg.Alerting.Severities()
	for sev, want := range map[string]string{"sev1": "P0", "warning": "P2", "critical": "P0", "Critical": "P0", "info": "P2", "P1": "P1", "": "P2"} {
		got, ok := s.Priority(sev)
		require.True(t, ok, sev)
		require.Equal(t, want, got, sev)
	}
	_, ok := s.Priority("sev9")
	require.False(t, ok)
	require.Equal(t, model.Duration(2*time.Minute), cfg.Rules.Warmup)
	d, _ := AlertingConfig{}.Severities().Priority("")
	require.Equal(t, "P1", d, "default_severity defaults to P1")
	_, err = Load([]byte("alerting: {default_severity: high}\n"), "d.yml")
	require.ErrorContains(t, err, `d.yml:1: default_severity "high": want P0, P1 or P2`)
}
