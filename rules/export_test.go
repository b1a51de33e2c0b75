package rules

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

func TestPrometheusRuleFileLoadsInPrometheus(t *testing.T) {
	data, err := PrometheusRuleFile(nil, []string{"vllm", "targets", "gpu"})
	require.NoError(t, err)
	rgs, errs := rulefmt.Parse(data, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs, "Prometheus' own parser accepts it")
	var names []string
	rules := 0
	for _, g := range rgs.Groups {
		names = append(names, g.Name)
		rules += len(g.Rules)
	}
	require.Equal(t, []string{"vllm", "targets", "gpu", "appliance-warmup"}, names)
	// VLLMSlowEndToEnd is compiled (instances, escalation) into two rules.
	require.Equal(t, 15, rules)
	text := string(data)
	require.NotRegexp(t, `(?m)^\s+(instances|escalate_when_all|warmup):`, text, "extensions are compiled away")
	require.Equal(t, 2, strings.Count(text, "alert: VLLMSlowEndToEnd"))

	_, err = PrometheusRuleFile(nil, []string{"nope"})
	require.ErrorContains(t, err, "nope")
}
