package probe

import (
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/stretchr/testify/require"
)

// TestRulePack parses the probes pack (../rules/packs/probes.yml) like the rules manager does, checks
// that every alert has a severity, and evaluates each expression on series
// shaped like the ones the probes write.
func TestRulePack(t *testing.T) {
	rgs, errs := rulefmt.ParseFile("../rules/packs/probes.yml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	exprs := map[string]string{}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			require.Regexp(t, regexp.MustCompile(`^P[012]$`), r.Labels["severity"], r.Alert)
			exprs[r.Alert] = strings.Join(strings.Fields(r.Expr), " ")
		}
	}
	want := map[string]string{"ProbeFailing": "P0", "ProbeTTFTHigh": "P1", "ProbeDurationHigh": "P1", "ProbeCertificateExpiresSoon": "P2"}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			require.Equal(t, want[r.Alert], r.Labels["severity"], r.Alert)
		}
	}
	require.Len(t, exprs, len(want))

	// Probes every 30s for 20m. ok always succeeds and is fast; down fails
	// from 10m on with a changing reason; slow's TTFT is above its 2s
	// threshold in more than 5% of the last 15m; cert expires in 10 days
	// (from time 0), certok in 30.
	expiry10d := (10 * 24 * time.Hour).Seconds()
	expiry30d := (30 * 24 * time.Hour).Seconds()
	script := `
load 30s
  probe_success{probe="ok"} 1x40
  probe_success{probe="down"} 1x19 _x21
  probe_success{probe="down", reason="timeout"} _x19 0x10 _x11
  probe_success{probe="down", reason="connection"} _x29 0x11
  probe_ttft_seconds{probe="ok"} 0.5x40
  probe_ttft_seconds{probe="slow"} 0.5x20 3x20
  probe_ttft_threshold_seconds{probe="ok"} 2x40
  probe_ttft_threshold_seconds{probe="slow"} 2x40
  probe_duration_seconds{probe="ok"} 1x40
  probe_duration_threshold_seconds{probe="ok"} 10x40
  probe_ssl_earliest_cert_expiry{probe="cert"} ` + ftoa(expiry10d) + `x40
  probe_ssl_earliest_cert_expiry{probe="certok"} ` + ftoa(expiry30d) + `x40

eval instant at 19m30s ` + exprs["ProbeFailing"] + `
  {probe="down"} 0

eval instant at 19m30s ` + exprs["ProbeTTFTHigh"] + `
  probe_ttft_seconds{probe="slow"} 3

eval instant at 19m30s ` + exprs["ProbeDurationHigh"] + `

eval instant at 19m30s ` + exprs["ProbeCertificateExpiresSoon"] + `
  {probe="cert"} ` + ftoa(expiry10d-19*60-30) + `
`
	promqltest.RunTest(t, script, promqltest.NewTestEngine(t, false, 5*time.Minute, 1_000_000))
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
