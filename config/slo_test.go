package config

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

func TestLoadSLOs(t *testing.T) {
	cfg, err := LoadFile("testdata/slos/good.yml")
	require.NoError(t, err)
	require.Len(t, cfg.SLOs, 3)

	lat := cfg.SLOs[0]
	require.Equal(t, "chat-latency", lat.Name)
	require.Equal(t, SLOKindLatency, lat.Kind)
	require.Equal(t, "vllm", lat.Service, "service defaults to the job the selector matches")
	require.Equal(t, Seconds(1.5), lat.Threshold)
	require.InDelta(t, 0.99, float64(lat.Objective), 1e-12)
	require.Equal(t, model.Duration(28*24*time.Hour), lat.Window)
	require.Equal(t, []string{"model_name"}, lat.By)

	av := cfg.SLOs[1]
	require.Equal(t, "chat", av.Probe)
	require.Equal(t, "chat", av.Service)
	require.InDelta(t, 0.995, float64(av.Objective), 1e-12)

	// Every digit TGI prints survives.
	require.Equal(t, Seconds(0.00015000000000000001), cfg.SLOs[2].Threshold)
	require.InDelta(t, 0.9, float64(cfg.SLOs[2].Objective), 1e-12)

	w := cfg.Reports.Weekly
	require.NotNil(t, w)
	require.Equal(t, time.Monday, w.Weekday())
	require.Equal(t, 9*60, w.Minute())
	require.Equal(t, "Asia/Shanghai", w.Location().String())
	require.Equal(t, []string{"chat", "email-team"}, w.Receivers)
}

func TestParseSeconds(t *testing.T) {
	f := func(in string, want float64) {
		t.Helper()
		got, err := ParseSeconds(in)
		require.NoError(t, err)
		require.Equal(t, want, float64(got))
	}
	f("1.5s", 1.5)
	f("1.5", 1.5)
	f("250ms", 0.25)
	f("150us", 0.00015)
	f("2m", 120)
	f("0.00015000000000000001", 0.00015000000000000001)
	_, err := ParseSeconds("fast")
	require.EqualError(t, err, `invalid duration "fast": want e.g. 1.5s, 250ms or a number of seconds`)
}

func TestParseRatio(t *testing.T) {
	f := func(in string, want float64, str string) {
		t.Helper()
		got, err := ParseRatio(in)
		require.NoError(t, err)
		require.InDelta(t, want, float64(got), 1e-15)
		require.Equal(t, str, got.String())
	}
	f("99%", 0.99, "99%")
	f("99.95%", 0.9995, "99.95%")
	f("0.995", 0.995, "99.5%")
}

func TestLoadSLOErrors(t *testing.T) {
	f := func(data, want string) {
		t.Helper()
		_, err := Load([]byte(data), "c.yml")
		require.EqualError(t, err, want)
	}
	f("slos:\n  - name: a\n    kind: latency\n    histogram: h\n    objective: 99%\n", "c.yml:3: slo a: a latency SLO needs a threshold above 0 (e.g. 1.5s)")
	f("slos:\n  - name: a\n    kind: ratio\n    objective: 99%\n", `c.yml:3: slo a: unknown kind "ratio"; want latency or availability`)
	f("slos:\n  - name: a\n    kind: availability\n    good: x\n    objective: 99%\n", "c.yml:3: slo a: an availability SLO needs probe, or both good and total")
	f("slos:\n  - name: a\n    kind: latency\n    histogram: h\n    threshold: 1s\n    selector: 'job=\"x\"'\n    objective: 99%\n", `c.yml:6: slo a: selector "job=\"x\"" must be label matchers in braces, e.g. {job="vllm"}`)
	f("slos:\n  - name: a\n    kind: latency\n    histogram: h\n    threshold: 1s\n    objective: 99%\n  - name: a\n    kind: latency\n    histogram: h\n    threshold: 1s\n    objective: 99%\n", `c.yml:7: slo name "a" is used twice (first at line 2); every SLO needs its own name`)
	f("reports:\n  weekly:\n    receivers: [nobody]\n", `c.yml:3: reports: weekly: receiver "nobody" is not defined in alerting.receivers`)
	f("reports:\n  weekly:\n    timezone: Mars/Olympus\n    receivers: [chat]\n", `c.yml:3: reports: weekly: timezone "Mars/Olympus" is not an IANA zone name (e.g. Asia/Shanghai, Europe/Berlin, UTC)`)
}
