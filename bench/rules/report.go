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
var figures = []struct {
	name  string
	value func(r *result) (float64, bool)
	unit  func(v float64) string
}{
	{
		name:  "time per evaluation round (mean)",
		value: func(r *result) (float64, bool) { return r.meanRound.Seconds(), r.rounds > 0 },
		unit:  func(v float64) string { return fmtSeconds(v) },
	},
	{
		name: "rules' share of one core at 15 s",
		value: func(r *result) (float64, bool) {
			return r.meanRound.Seconds() / 15, r.rounds > 0
		},
		unit: func(v float64) string { return fmt.Sprintf("%.2f %%", 100*v) },
	},
	{
		name:  "process CPU share (scrape, store, rules)",
		value: func(r *result) (float64, bool) { return r.cpuShare, r.window > 0 },
		unit:  func(v float64) string { return fmt.Sprintf("%.1f %% of a core", 100*v) },
	},
	{
		name:  "peak RSS",
		value: func(r *result) (float64, bool) { return float64(r.peakRSS), r.peakRSS > 0 },
		unit:  harness.Bytes,
	},
}

// details explain the figures; they get no ratio.
var details = []struct {
	name string
	cell func(r *result) string
}{
	{"rounds in the window", func(r *result) string { return fmt.Sprintf("%.1f in %s", r.rounds, r.window.Round(time.Second)) }},
	{"sampled rounds (min – max)", func(r *result) string {
		if len(r.sampled) == 0 {
			return "–"
		}
		return fmtSeconds(slices.Min(r.sampled).Seconds()) + " – " + fmtSeconds(slices.Max(r.sampled).Seconds())
	}},
	{"rules loaded", func(r *result) string { return fmt.Sprintf("%.0f", r.rules) }},
	{"samples the rules wrote in a round", func(r *result) string { return fmt.Sprintf("%.0f", r.outSamples) }},
	{"missed iterations, failed evaluations", func(r *result) string { return fmt.Sprintf("%.0f, %.0f", r.missed, r.failures) }},
}

func (rep *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Rule evaluation: Prometheus %s vs the appliance\n\n", prometheusVersion)
	fmt.Fprintf(&b, "Run %s on %s.\n\n", rep.started.UTC().Format(time.RFC3339), rep.machine)
	fmt.Fprintf(&b, "Fleet: %d simulated vLLM instances with two models (%d series) and %d synthetic targets (%d series): %d series scraped every %s. "+
		"Rules: the %s packs as the appliance compiles them plus %d synthetic rules, %d groups, evaluated every %s. "+
		"Warm-up %s, then a window of %s, per system, one system at a time.\n\n",
		rep.opts.instances, rep.vllmSeries, syntheticTargets, rep.syntheticSeries, rep.vllmSeries+rep.syntheticSeries, rep.opts.interval,
		strings.Join(packs, ", "), syntheticRules, len(packs)+1+(syntheticRules+rulesPerGroup-1)/rulesPerGroup, rep.opts.interval,
		rep.opts.warmup, rep.opts.duration)

	t := harness.Table{Header: []string{""}}
	for _, r := range rep.results {
		t.Header = append(t.Header, r.sys.title)
	}
	ratio := len(rep.results) == 2
	if ratio {
		t.Header = append(t.Header, rep.results[1].sys.title+" ÷ "+rep.results[0].sys.title)
	}
	for _, f := range figures {
		row := []string{f.name}
		var vals []float64
		for _, r := range rep.results {
			v, ok := f.value(r)
			if !ok {
				row = append(row, "–")
				continue
			}
			row = append(row, f.unit(v))
			vals = append(vals, v)
		}
		if ratio {
			if len(vals) == 2 && vals[0] > 0 {
				row = append(row, fmt.Sprintf("%.2f×", vals[1]/vals[0]))
			} else {
				row = append(row, "–")
			}
		}
		t.AddRow(row...)
	}
	for _, d := range details {
		row := []string{d.name}
		for _, r := range rep.results {
			row = append(row, d.cell(r))
		}
		t.AddRow(row...)
	}
	b.WriteString(t.Markdown())
	b.WriteString("\nTime per round: the rules manager's own counters over the window " +
		"(`prometheus_rule_group_duration_seconds_sum` ÷ (`prometheus_rule_group_iterations_total` ÷ groups); " +
		"the appliance prefixes them `appliance_`). Process CPU share: user+system time of the process over the window, " +
		"scraping and storing included.\n")
	for _, r := range rep.results {
		if r.err != nil {
			fmt.Fprintf(&b, "\n**%s failed**: %v\n", r.sys.title, r.err)
		}
		if r.stopErr != nil {
			fmt.Fprintf(&b, "\n%s did not stop cleanly: %v\n", r.sys.title, r.stopErr)
		}
	}
	return b.String()
}

func fmtSeconds(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.0f ms", v*1000)
	}
	return fmt.Sprintf("%.2f s", v)
}
