package slo

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	yaml3 "go.yaml.in/yaml/v3"

	"github.com/aiserve/appliance/config"
)

// Names of what the generated rules write and raise.
const (
	// ErrorRatioPrefix + window is the recording rule of the share of
	// bad events over that window (Sloth's name).
	ErrorRatioPrefix = "slo:sli_error:ratio_rate"
	ObjectiveMetric  = "slo:objective:ratio"
	AlertFast        = "SLOBudgetBurnFast"
	AlertSlow        = "SLOBudgetBurnSlow"
	// GroupPrefix + name is the rule group of one SLO in /api/v1/rules.
	GroupPrefix = "slo:"
	// SLOLabel names the SLO on every generated series and alert.
	SLOLabel = "slo"
)

// BurnWindow is one multi-window alert condition: both error ratios over
// Long and Short above Factor × (1 − objective).
type BurnWindow struct {
	Long, Short time.Duration
	// Budget is the share of the window's error budget that a burn
	// lasting Long spends at the threshold.
	Budget   float64
	Severity string
}

// Factor is the burn rate at which the condition holds, for an SLO
// window: Budget × window / Long (SRE workbook, table 5-8).
func (b BurnWindow) Factor(window time.Duration) float64 {
	return b.Budget * float64(window) / float64(b.Long)
}

// BurnWindows returns the four conditions for an SLO window: the SRE
// workbook's for 28d and 30d (14.4, 6, 3 and 1 on 30d), Sloth's budgets for
// 7d, whose factors (13.44, 3.5, 1.4, 0.98) keep the slowest one above the
// budget rate: with the workbook's 10% the 3d/6h factor on a 7d window
// would be 0.23 and a healthy service would raise tickets.
func BurnWindows(window time.Duration) []BurnWindow {
	budgets := [4]float64{0.02, 0.05, 0.10, 0.10}
	if window <= 7*24*time.Hour {
		budgets = [4]float64{0.08, 0.125, 0.20, 0.42}
	}
	return []BurnWindow{
		{Long: time.Hour, Short: 5 * time.Minute, Budget: budgets[0], Severity: "P0"},
		{Long: 6 * time.Hour, Short: 30 * time.Minute, Budget: budgets[1], Severity: "P0"},
		{Long: 24 * time.Hour, Short: 2 * time.Hour, Budget: budgets[2], Severity: "P1"},
		{Long: 72 * time.Hour, Short: 6 * time.Hour, Budget: budgets[3], Severity: "P1"},
	}
}

// ratioWindows are the windows recorded, in order.
var ratioWindows = []time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour, 72 * time.Hour}

// warmingExcluded leaves out the series of warming instances.
const warmingExcluded = " unless on (instance) (appliance_instance_warming == 1)"

// Rules returns one rule group per SLO, in the order of slos. les maps an
// SLO's name to the le text of its threshold as the data spells it
// (ResolveBounds); an SLO missing there matches the usual spellings.
func Rules(slos []*config.SLOConfig, les map[string]string) []rulefmt.RuleGroup {
	groups := make([]rulefmt.RuleGroup, 0, len(slos))
	for _, s := range slos {
		groups = append(groups, group(s, les[s.Name]))
	}
	return groups
}

// RuleFile returns Rules as a rule file (YAML).
func RuleFile(slos []*config.SLOConfig, les map[string]string) ([]byte, error) {
	b, err := yaml3.Marshal(rulefmt.RuleGroups{Groups: Rules(slos, les)})
	if err != nil {
		return nil, fmt.Errorf("encode slo rules: %w", err)
	}
	return b, nil
}

// GroupInterval is the evaluation interval of the SLO groups. Their
// ratios read up to 3 days of raw samples per series at every evaluation;
// once a minute keeps that affordable, and a page that fires up to a
// minute later is still within the workbook's detection times (the 1h/5m
// pair at 14.4x takes minutes to trip anyway).
const GroupInterval = time.Minute

func group(s *config.SLOConfig, le string) rulefmt.RuleGroup {
	g := rulefmt.RuleGroup{Name: GroupPrefix + s.Name, Interval: model.Duration(GroupInterval)}
	sloLabels := map[string]string{SLOLabel: s.Name}
	for _, w := range ratioWindows {
		g.Rules = append(g.Rules, rulefmt.Rule{
			Record: ErrorRatioPrefix + promDuration(w),
			Expr:   errorRatioExpr(s, le, w),
			Labels: sloLabels,
		})
	}
	obj := formatRatio(float64(s.Objective))
	g.Rules = append(g.Rules, rulefmt.Rule{Record: ObjectiveMetric, Expr: "vector(" + obj + ")", Labels: sloLabels})

	window := time.Duration(s.Window)
	budget := 1 - float64(s.Objective)
	for _, sev := range []string{"P0", "P1"} {
		var conds []string
		var desc []string
		for _, bw := range BurnWindows(window) {
			if bw.Severity != sev {
				continue
			}
			th := formatRatio(bw.Factor(window) * budget)
			sel := fmt.Sprintf("{%s=%q}", SLOLabel, s.Name)
			conds = append(conds, fmt.Sprintf("(%s%s%s > %s and %s%s%s > %s)",
				ErrorRatioPrefix, promDuration(bw.Long), sel, th, ErrorRatioPrefix, promDuration(bw.Short), sel, th))
			desc = append(desc, fmt.Sprintf("%s/%s above %s×", promDuration(bw.Long), promDuration(bw.Short), strconv.FormatFloat(bw.Factor(window), 'g', 4, 64)))
		}
		name, what := AlertFast, "is burning its error budget fast"
		if sev == "P1" {
			name, what = AlertSlow, "is burning its error budget"
		}
		g.Rules = append(g.Rules, rulefmt.Rule{
			Alert:  name,
			Expr:   strings.Join(conds, " or "),
			Labels: map[string]string{SLOLabel: s.Name, "severity": sev},
			Annotations: map[string]string{
				"summary":     fmt.Sprintf("SLO %s %s (error ratio {{ $value | humanizePercentage }})", s.Name, what),
				"description": fmt.Sprintf("Objective %s over %s; burn rate %s.", s.Objective, Days(time.Duration(s.Window)), strings.Join(desc, " or ")),
			},
		})
	}
	return g
}

// errorRatioExpr is the share of bad events over w.
func errorRatioExpr(s *config.SLOConfig, le string, w time.Duration) string {
	by := ""
	if len(s.By) > 0 {
		by = " by (" + strings.Join(s.By, ", ") + ")"
	}
	win := "[" + promDuration(w) + "]"
	switch {
	case s.Kind == config.SLOKindLatency:
		m := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s.Selector), "{"), "}"))
		leM := fmt.Sprintf("le=~%q", leAlternatives(float64(s.Threshold)))
		if le != "" {
			leM = fmt.Sprintf("le=%q", le)
		}
		good := joinMatchers(m, leM)
		total := ""
		if m != "" {
			total = "{" + m + "}"
		}
		return fmt.Sprintf("1 - (sum%s (rate(%s_bucket{%s}%s)%s) / sum%s (rate(%s_count%s%s)%s))",
			by, s.Histogram, good, win, warmingExcluded, by, s.Histogram, total, win, warmingExcluded)
	case s.Probe != "":
		sel := fmt.Sprintf("probe_success{probe=%q}", s.Probe)
		return fmt.Sprintf("1 - (sum%s (sum_over_time(%s%s)) / sum%s (count_over_time(%s%s)))", by, sel, win, by, sel, win)
	default:
		return fmt.Sprintf("1 - (sum%s (%s) / sum%s (%s))", by, windowed(s.Good, w), by, windowed(s.Total, w))
	}
}

// windowed puts w into an availability SLO's good or total expression:
// where it says [$window], else around it as rate(expr[w]) (a counter's
// selector).
func windowed(expr string, w time.Duration) string {
	if strings.Contains(expr, "$window") {
		return strings.ReplaceAll(expr, "$window", promDuration(w))
	}
	return fmt.Sprintf("rate(%s[%s])%s", expr, promDuration(w), warmingExcluded)
}

func joinMatchers(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

func promDuration(d time.Duration) string { return model.Duration(d).String() }

// Days prints a whole number of days as "28d" (Prometheus would print
// 4w), anything else as Prometheus does.
func Days(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return promDuration(d)
}

// formatRatio prints a generated number with 12 significant digits, so
// that 14.4 × 0.001 prints 0.0144, not 0.014400000000000001.
func formatRatio(v float64) string {
	return strconv.FormatFloat(v, 'g', 12, 64)
}
