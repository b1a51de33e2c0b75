package rules

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
)

// TestConfigChecksExtendedRuleFiles: `appliance check` (config.Check)
// accepts rule files with extensions and refuses bad ones at file:line.
func TestConfigChecksExtendedRuleFiles(t *testing.T) {
	require.Empty(t, config.CheckRuleFile("../config/testdata/rules-ext/good.rules.yml"))

	var got []string
	for _, err := range config.Check("../config/testdata/rules-ext/appliance.yml") {
		got = append(got, err.Error())
	}
	const f = "../config/testdata/rules-ext/bad.rules.yml"
	require.Equal(t, []string{
		f + `:4: group "bad", rule 1, "NoSeverity": the label severity is missing; every alerting rule needs severity: P0, P1 or P2`,
		f + `:8: group "bad", rule 2, "WrongSeverity": severity "critical": want P0, P1 or P2`,
		f + ":11: group \"bad\", rule 3, \"NotAComparison\": instances needs an expression that is a comparison without bool, such as `latency > 2`: it is evaluated per instance",
		f + `:18: group "bad", rule 4, "EscalateDown": escalate_when_all P2 must be more urgent than the rule's severity P1`,
	}, got)
}
