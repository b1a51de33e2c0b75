package rules

import (
	"log/slog"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/aiserve/appliance/rules/rulefile"
)

// TestPacksPassPromtool checks what `promtool check rules` checks, with
// the same parser (rulefmt, unknown fields refused): every pack as
// written when it uses no extension, and what every pack compiles to.
func TestPacksPassPromtool(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	strict := func(data []byte) []error {
		_, errs := rulefmt.Parse(data, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
		return errs
	}
	var withExt []string
	for _, n := range PackNames() {
		data, _ := Pack(n)
		f, errs := rulefile.Parse(data)
		require.Empty(t, errs, "pack %s", n)
		uses := false
		for _, g := range f.Ext {
			for _, e := range g {
				uses = uses || e.Instances != nil || e.EscalateWhenAll != "" || e.Warmup != nil
			}
		}
		for _, w := range f.GroupWarmup {
			uses = uses || w != nil
		}
		if uses {
			withExt = append(withExt, n)
		} else {
			require.Empty(t, strict(data), "pack %s as written", n)
		}
		rgs, _ := f.Compile()
		out, err := yaml.Marshal(rgs)
		require.NoError(t, err)
		require.Empty(t, strict(out), "pack %s compiled:\n%s", n, out)
		for _, g := range rgs.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					require.Contains(t, rulefile.Severities, r.Labels["severity"], "pack %s, alert %s", n, r.Alert)
				}
			}
		}
	}
	// Only the cross-instance rule of vllm needs an extension, and the
	// appliance pack turns the warm-up off.
	require.Equal(t, []string{"appliance", "vllm"}, withExt)
}
