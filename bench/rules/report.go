package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

// report collects a run's results and renders them as Markdown.
type report struct {
	opts            options
	machine         harness.Machine
	started         time.Time
	vllmSeries      int
	syntheticSeries int
	results         []*result
}

// figures are the rows with a ratio; lower is better for each.
var figures = []harness.Figure[*result]{
	{
		Name:  "time per evaluation round (mean)",
		Value: func(r *result) (float64, bool) { return r.meanRound.Seconds(), r.rounds > 0 },
		Unit:  func(v float64) string { return fmtSeconds(v) },
	},
	{
		Name: "rules' share of one core at 15 s",
		Value: func(r *result) (float64, bool) {
			return r.meanRound.Seconds() / 15, r.rounds > 0
		},
		Unit: func(v float64) string { return fmt.Sprintf("%.2f %%", 100*v) },
	},
	{
		Name:  "process CPU share (scrape, store, rules)",
		Value: func(r *result) (float64, bool) { return r.cpuShare, r.window > 0 },
		Unit:  func(v float64) string { return fmt.Sprintf("%.1f %% of a core", 100*v) },
	},
	{
		Name:  "peak RSS",
		Value: func(r *result) (float64, bool) { return float64(r.peakRSS), r.peakRSS > 0 },
		Unit:  harness.Bytes,
	},
}

// details explain the figures; they get no ratio.
var details = []harness.Detail[*result]{
	{Name: "rounds in the window", Cell: func(r *result) string { return fmt.Sprintf("%.1f in %s", r.rounds, r.window.Round(time.Second)) }},
	{Name: "sampled rounds (min – max)", Cell: func(r *result) string {
		if len(r.sampled) == 0 {
			return "–"
		}
		return fmtSeconds(slices.Min(r.sampled).Seconds()) + " – " + fmtSeconds(slices.Max(r.sampled).Seconds())
	}},
	{Name: "rules loaded", Cell: func(r *result) string { return fmt.Sprintf("%.0f", r.rules) }},
	{Name: "samples the rules wrote in a round", Cell: func(r *result) string { return fmt.Sprintf("%.0f", r.outSamples) }},
	{Name: "missed iterations, failed evaluations", Cell: func(r *result) string { return fmt.Sprintf("%.0f, %.0f", r.missed, r.failures) }},
}

func (rep *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Rule evaluation: Prometheus %s vs the appliance\n\n", harness.PrometheusVersion)
	fmt.Fprintf(&b, "Run %s on %s.\n\n", rep.started.UTC().Format(time.RFC3339), rep.machine)
	fmt.Fprintf(&b, "Fleet: %d simulated vLLM instances with two models (%d series) and %d synthetic targets (%d series): %d series scraped every %s. "+
		"Rules: the %s packs as the appliance compiles them plus %d synthetic rules, %d groups, evaluated every %s. "+
		"Warm-up %s, then a window of %s, per system, one system at a time.\n\n",
		rep.opts.instances, rep.vllmSeries, syntheticTargets, rep.syntheticSeries, rep.vllmSeries+rep.syntheticSeries, rep.opts.interval,
		strings.Join(packs, ", "), syntheticRules, len(packs)+1+(syntheticRules+rulesPerGroup-1)/rulesPerGroup, rep.opts.interval,
		rep.opts.warmup, rep.opts.duration)

	cmp := harness.Comparison[*result]{Title: title, Missing: "–", Figures: figures, Details: details}
	if len(rep.results) == 2 {
		cmp.RatioHeader = rep.results[1].sys.Title + " ÷ " + rep.results[0].sys.Title
		cmp.Ratio = func(vals []float64, have []bool) string {
			if have[0] && have[1] && vals[0] > 0 {
				return fmt.Sprintf("%.2f×", vals[1]/vals[0])
			}
			return "–"
		}
	}
	t := cmp.Table(rep.results)
	b.WriteString(t.Markdown())
	b.WriteString("\nTime per round: the rules manager's own counters over the window " +
		"(`prometheus_rule_group_duration_seconds_sum` ÷ (`prometheus_rule_group_iterations_total` ÷ groups); " +
		"the appliance prefixes them `appliance_`). Process CPU share: user+system time of the process over the window, " +
		"scraping and storing included.\n")
	for _, r := range rep.results {
		if r.err != nil {
			fmt.Fprintf(&b, "\n**%s failed**: %v\n", r.sys.Title, r.err)
		}
		if r.stopErr != nil {
			fmt.Fprintf(&b, "\n%s did not stop cleanly: %v\n", r.sys.Title, r.stopErr)
		}
	}
	return b.String()
}

func title(r *result) string { return r.sys.Title }

func fmtSeconds(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.0f ms", v*1000)
	}
	return fmt.Sprintf("%.2f s", v)
}
