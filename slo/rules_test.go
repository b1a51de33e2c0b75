package slo

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/rules/rulefile"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func loadSLOs(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, err := config.LoadFile(path)
	require.NoError(t, err)
	return cfg
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "%s differs; rerun with -update after checking the change", path)
}

// TestRuleFile checks the generated groups against a golden file, and
// that the rules part accepts them as a rule file (severity on every
// alert, PromQL that parses).
func TestRuleFile(t *testing.T) {
	cfg := loadSLOs(t, "testdata/slos.yml")
	got, err := RuleFile(cfg.SLOs, map[string]string{"tgi-fast": "0.00015000000000000001"})
	require.NoError(t, err)
	golden(t, "slos.rules.yml", got)

	f, errs := rulefile.Parse(got)
	require.Empty(t, errs)
	rgs, _ := f.Compile()
	require.Len(t, rgs.Groups, len(cfg.SLOs))
	for i, g := range rgs.Groups {
		require.Equal(t, "slo:"+cfg.SLOs[i].Name, g.Name)
	}
	// Factors print as the workbook's numbers, not 0.014400000000000001.
	require.Contains(t, string(got), "> 0.0144 and")
	require.NotContains(t, string(got), "0.0144000")
}

func TestBurnWindowFactors(t *testing.T) {
	f := func(days int, want ...float64) {
		t.Helper()
		w := BurnWindows(time.Duration(days) * 24 * time.Hour)
		require.Len(t, w, len(want))
		for i := range w {
			require.InDelta(t, want[i], w[i].Factor(time.Duration(days)*24*time.Hour), 1e-9, "%dd %s/%s", days, w[i].Long, w[i].Short)
		}
	}
	f(30, 14.4, 6, 3, 1)
	f(28, 13.44, 5.6, 2.8, 0.9333333333)
	f(7, 13.44, 3.5, 1.4, 0.98)
}

func TestMatchBound(t *testing.T) {
	f := func(threshold float64, les []string, want, wantErr string) {
		t.Helper()
		got, err := MatchBound(threshold, les)
		if wantErr != "" {
			require.EqualError(t, err, wantErr)
			require.ErrorIs(t, err, ErrNoBound)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	f(1, []string{"0.5", "1.0", "+Inf"}, "1.0", "")
	f(1, []string{"0.5", "1", "+Inf"}, "1", "")
	f(1.5, []string{"1.5e+00", "+Inf"}, "1.5e+00", "")
	// TGI's first bound, written as a person would.
	f(0.00015, DefaultKnownBounds()["tgi_request_duration"], "0.00015000000000000001", "")
	f(1.5, DefaultKnownBounds()["tgi_request_duration"], "",
		"threshold is not a bucket bound of the histogram; the nearest bounds are 1.122274146401882 and 1.683411219602823")
	f(0.1, []string{"0.3", "0.5", "+Inf"}, "", "threshold is not a bucket bound of the histogram; the lowest bound is 0.3")
	f(9000, vllmLatencyBounds, "", "threshold is not a bucket bound of the histogram; the highest finite bound is 7680.0")
}

// TestKnownBoundsMatchFixtures checks the built-in bounds against the
// model servers' /metrics in ../shared/fixtures.
func TestKnownBoundsMatchFixtures(t *testing.T) {
	f := func(file, metric string) {
		t.Helper()
		data, err := os.ReadFile("/work/shared/fixtures/" + file)
		if os.IsNotExist(err) && os.Getenv("CI") != "true" {
			t.Skip("fixtures not here")
		}
		require.NoError(t, err)
		var les []string
		for _, l := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(l, metric+"_bucket{") {
				continue
			}
			i := strings.Index(l, `le="`)
			le := l[i+4:]
			le = le[:strings.IndexByte(le, '"')]
			if le != "+Inf" && !contains(les, le) {
				les = append(les, le)
			}
		}
		require.Equal(t, les, DefaultKnownBounds()[metric], file)
	}
	f("vllm.prom", "vllm:e2e_request_latency_seconds")
	f("sglang.prom", "sglang:e2e_request_latency_seconds")
	f("tgi.prom", "tgi_request_duration")
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestCheckBounds(t *testing.T) {
	cfg := loadSLOs(t, "testdata/slos.yml")
	err := CheckBounds(context.Background(), cfg.SLOs, DefaultKnownBounds())
	require.EqualError(t, err, "slo chat-ttft-bad: threshold 1.2s: threshold is not a bucket bound of the histogram; the nearest bounds are 1.0 and 1.5 of vllm:e2e_request_latency_seconds")
}
