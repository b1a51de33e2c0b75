package main

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPrometheusFlagNames(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	var f runFlags
	f.register(fs)
	require.NoError(t, fs.Parse([]string{
		"--config.file=/etc/appliance/prometheus.yml",
		"--web.listen-address=127.0.0.1:9091",
		"--storage.tsdb.path", "/var/lib/appliance",
		"--log.level=debug",
		"--log.format=logfmt",
	}))
	require.Equal(t, "/etc/appliance/prometheus.yml", f.config)
	require.Equal(t, "127.0.0.1:9091", f.listen)
	require.Equal(t, "/var/lib/appliance", f.data)
	require.Equal(t, "debug", f.logLevel)
	_, err := newLogger(&out, f.logLevel, f.logFormat)
	require.NoError(t, err, "logfmt is Prometheus' name for the text format")
	_, err = newLogger(&out, "info", "json")
	require.NoError(t, err)
	_, err = newLogger(&out, "info", "xml")
	require.ErrorContains(t, err, "want text, logfmt or json")

	// The appliance's own names still work, and the help lists both.
	var g runFlags
	fs2 := flag.NewFlagSet("run", flag.ContinueOnError)
	g.register(fs2)
	require.NoError(t, fs2.Parse([]string{"--config", "a.yml", "--data", "d", "--listen", ":1"}))
	require.Equal(t, runFlags{config: "a.yml", data: "d", listen: ":1", logLevel: "info", logFormat: "text", gogc: gogcUnset}, g)
	out.Reset()
	fs.PrintDefaults()
	for _, a := range prometheusFlags {
		require.Contains(t, out.String(), "-"+a.alias+" string\n    \tPrometheus' name for --"+a.name)
	}
}

func TestPrometheusStyleStart(t *testing.T) {
	require.True(t, isPrometheusStyleStart([]string{"--config.file=prometheus.yml"}))
	require.True(t, isPrometheusStyleStart([]string{"--web.listen-address", ":9090"}))
	require.False(t, isPrometheusStyleStart([]string{"run", "--config.file=x"}))
	require.False(t, isPrometheusStyleStart([]string{"--help"}))
	require.False(t, isPrometheusStyleStart([]string{"--version"}))
	require.False(t, isPrometheusStyleStart(nil))

	// Without a command the flags go to run: a bad one is run's error.
	var stdout, stderr bytes.Buffer
	require.Equal(t, 2, runMain([]string{"--log.format=xml"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "appliance run: --log.format")
}

func TestPrometheusRelease(t *testing.T) {
	for mod, want := range map[string]string{"v0.316.0": "3.16.0", "v0.300.1": "3.0.1", "v0.54.1": "", "v2.0.0": ""} {
		got, ok := prometheusRelease(mod)
		require.Equal(t, want != "", ok, mod)
		require.Equal(t, want, got, mod)
	}
	require.Regexp(t, `^3\.\d+\.\d+$`, buildInfo().Version, "a Prometheus 3 version, as Grafana reads it")
}

func TestUsageListsCommands(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runMain([]string{"--help"}, &stdout, &stderr))
	for _, s := range []string{"appliance test rules FILE...", "appliance rules export", "--config.file", "--storage.tsdb.path", "--web.listen-address", "--log.format=logfmt|json"} {
		require.Contains(t, stdout.String(), s)
	}
}
