package rulefile

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// FuzzParse feeds the rule-file parser arbitrary files. Invariants: no
// panic; a refused file has errors and no File, and every error it gives
// is an error value with text; an accepted file compiles, each alerting
// rule with a priority (a rule without a severity label routes as the
// default; severities such as critical map to one), every generated
// expression parses as PromQL (the loader reports "generated PromQL does
// not parse (please report this)" otherwise), and the compiled groups,
// written back as YAML, are a rule file Prometheus' own rulefmt accepts.
func FuzzParse(f *testing.F) {
	packs, err := filepath.Glob("../packs/*.yml")
	require.NoError(f, err)
	require.NotEmpty(f, packs)
	for _, p := range packs {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`groups:
  - name: fleet
    interval: 1s
    warmup: 0s
    rules:
      - alert: FleetSlowTTFT
        expr: histogram_quantile(0.9, sum by (le, instance, job) (rate(vllm:time_to_first_token_seconds_bucket[10s]))) > 0.6
        for: 3s
        instances: {min: 1}
        escalate_when_all: P0
        labels:
          severity: P1
      - alert: HalfSlow
        expr: vllm:num_requests_waiting > 10
        instances: {ratio: 0.5, by: [instance, pod]}
        warmup: 2m
        labels: {severity: P2}
      - record: job:up:sum
        expr: sum by (job) (up)
`))
	f.Add([]byte("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up == 0\n        instances: {min: 0, ratio: 2}\n        labels: {severity: P1}\n"))
	f.Add([]byte("groups: [{name: g, rules: [{alert: A, expr: 'up ==', labels: {severity: P0}}]}]\n"))
	// Found by CI's fuzzing: an alert without a severity label (it routes
	// as the default) and one with a mapped severity.
	f.Add([]byte("groups: [{name: g, rules: [{alert: A, expr: 'up == 0'}, {alert: B, expr: 'up == 0', labels: {severity: critical}}]}]\n"))

	p := parser.NewParser(parser.Options{})
	logger := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, errs := Parse(data)
		if len(errs) > 0 {
			require.Nil(t, file)
			for _, e := range errs {
				require.Error(t, e)
				require.NotEmpty(t, e.Error())
				var le *Error
				if errors.As(e, &le) {
					require.GreaterOrEqual(t, le.Line, 0)
				}
			}
			return
		}
		require.NotNil(t, file)
		rgs, info := file.Compile()
		for _, g := range rgs.Groups {
			for _, r := range g.Rules {
				_, err := p.ParseExpr(r.Expr)
				require.NoError(t, err, "group %q, rule %q: generated %q", g.Name, r.Alert+r.Record, r.Expr)
			}
		}
		for _, c := range info {
			require.Contains(t, Severities, c.Priority, "alert %q", c.Alert)
		}
		out, err := yaml.Marshal(rgs)
		require.NoError(t, err)
		_, errs = rulefmt.Parse(out, false, model.UTF8Validation, p, logger)
		require.Empty(t, errs, "compiled groups:\n%s", out)
	})
}
