package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
)

// report collects a run's results and renders them as Markdown.
type report struct {
	opts            options
	machine         harness.Machine
	started         time.Time
	fleet           demo.FleetOptions
	seriesPerScrape int
	results         []*result
	phases          []phaseTime
}

type phaseTime struct {
	name string
	took time.Duration
}

// figures are the rows of the main table with a ratio; lower is better
// for all of them.
var figures = []harness.Figure[*result]{
	{
		Name: "CPU s per 1M samples (steady state)",
		Value: func(r *result) (float64, bool) {
			if r.samplesWindow <= 0 {
				return 0, false
			}
			return r.cpuWindow.Seconds() / r.samplesWindow * 1e6, true
		},
		Unit: func(v float64) string { return fmt.Sprintf("%.2f s", v) },
	},
	{
		Name: "peak RSS",
		Value: func(r *result) (float64, bool) {
			return float64(r.peakRSS), r.peakRSS > 0
		},
		Unit: harness.Bytes,
	},
	{
		Name: "disk bytes per sample",
		Value: func(r *result) (float64, bool) {
			if r.samplesTotal <= 0 || r.disk.Files == 0 {
				return 0, false
			}
			return float64(r.disk.Allocated) / r.samplesTotal, true
		},
		Unit: func(v float64) string { return fmt.Sprintf("%.2f B", v) },
	},
	{
		Name: "p95 query_range latency (median)",
		Value: func(r *result) (float64, bool) {
			if len(r.queries) == 0 || r.queryFailure != nil {
				return 0, false
			}
			return harness.Median(r.queries).Seconds(), true
		},
		Unit: func(v float64) string { return fmtDuration(time.Duration(v * float64(time.Second))) },
	},
}

// details are rows that explain the figures; they get no ratio.
var details = []harness.Detail[*result]{
	{Name: "fleet series per scrape (start → end)", Cell: func(r *result) string {
		if r.seriesPerScrape == 0 {
			return "—"
		}
		return fmt.Sprintf("%d → %d", r.seriesPerScrape, r.seriesAtEnd)
	}},
	{Name: "samples ingested per s (window)", Cell: func(r *result) string {
		if r.window <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", r.samplesWindow/r.window.Seconds())
	}},
	{Name: "CPU cores used (window)", Cell: func(r *result) string {
		if r.window <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.3f", r.cpuWindow.Seconds()/r.window.Seconds())
	}},
	{Name: "samples ingested (start to stop)", Cell: func(r *result) string {
		if r.samplesTotal <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", r.samplesTotal)
	}},
	{Name: "disk after stop (du / apparent)", Cell: func(r *result) string {
		if r.disk.Files == 0 {
			return "—"
		}
		return harness.Bytes(float64(r.disk.Allocated)) + " / " + harness.Bytes(float64(r.disk.Apparent))
	}},
	{Name: "query min … max", Cell: func(r *result) string {
		if len(r.queries) == 0 {
			return "—"
		}
		lo, hi := r.queries[0], r.queries[0]
		for _, q := range r.queries {
			lo, hi = min(lo, q), max(hi, q)
		}
		return fmtDuration(lo) + " … " + fmtDuration(hi)
	}},
	{Name: "query result (series × points)", Cell: func(r *result) string {
		if len(r.queries) == 0 {
			return "—"
		}
		return fmt.Sprintf("%d × %d", r.querySeries, r.queryPoints/max(1, r.querySeries))
	}},
	{Name: "graceful stop", Cell: func(r *result) string {
		switch {
		case r.disk.Files == 0 && r.err != nil:
			return "—"
		case r.stopErr != nil:
			return "no: " + r.stopErr.Error()
		}
		return "yes"
	}},
}

func (rep *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Ingest benchmark, %s\n\n", rep.started.UTC().Format("2006-01-02 15:04 MST"))

	cmp := harness.Comparison[*result]{
		Title:       title,
		Corner:      "metric",
		Missing:     "—",
		Figures:     figures,
		Details:     details,
		RatioHeader: "appliance ÷ best anchor",
		Ratio:       rep.ratio,
	}
	t := cmp.Table(rep.results)
	b.WriteString(t.Markdown())
	b.WriteString("\nLower is better for the first four rows; the ratio divides the appliance's figure by the better of the two anchors.\n")

	b.WriteString(rep.breakdownMarkdown())

	var failed []string
	for _, r := range rep.results {
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("- %s: %v", r.sys.Name, r.err))
		}
	}
	if len(failed) > 0 {
		b.WriteString("\n## Failures\n\n" + strings.Join(failed, "\n") + "\n")
	}

	o := rep.opts
	b.WriteString("\n## Parameters\n\n")
	fmt.Fprintf(&b, "- machine: %s\n", rep.machine)
	fmt.Fprintf(&b, "- fleet: %d instances × %d model(s) (%s), seed %d, request rate %g/s, in the benchmark's process (its CPU is not counted)\n",
		rep.fleet.Instances, len(rep.fleet.Models), strings.Join(rep.fleet.Models, ", "), rep.fleet.Seed, rep.fleet.RequestRate)
	fmt.Fprintf(&b, "- series per scrape round, counted from the first scrape: %d (plus each system's own `up` and `scrape_*` series per target; the count grows a little as simulated requests bring new label values)\n", rep.seriesPerScrape)
	fmt.Fprintf(&b, "- scrape: job `vllm`, static targets, interval and timeout %s\n", o.interval)
	fmt.Fprintf(&b, "- per system: fresh data dir, %s warm-up (excluded from CPU per sample), then a %s steady-state window\n", o.warmup, o.duration)
	fmt.Fprintf(&b, "- query: `%s`, query_range from the moment the system was ready to the end of the window", benchQuery)
	for _, r := range rep.results {
		if r.queryStep > 0 {
			fmt.Fprintf(&b, " (span %s, step %s)", r.querySpan.Round(time.Second), r.queryStep)
			break
		}
	}
	fmt.Fprintf(&b, ", %d runs, median reported; ingestion continues meanwhile\n", o.queries)
	b.WriteString("- CPU: utime+stime of the system's process from /proc/<pid>/stat; peak RSS: VmHWM at the end of the run (after the queries)\n")
	b.WriteString("- disk: `du` of the data dir after SIGTERM and exit, divided by the samples ingested from start to stop\n")
	for _, r := range rep.results {
		fmt.Fprintf(&b, "- %s: %s\n", r.sys.Title, r.sys.note)
	}

	b.WriteString("\n## Phases\n\n")
	for _, p := range rep.phases {
		fmt.Fprintf(&b, "- %s: %s\n", p.name, p.took.Round(time.Second))
	}
	return b.String()
}

func title(r *result) string { return r.sys.Title }

// ratio divides the appliance's value of a figure by the best (lowest) of
// the anchors'.
func (rep *report) ratio(vals []float64, have []bool) string {
	best, haveBest := math.Inf(1), false
	appliance, haveAppliance := 0.0, false
	for i, r := range rep.results {
		switch {
		case !have[i]:
		case r.sys.Name == harness.Appliance.Name:
			appliance, haveAppliance = vals[i], true
		case vals[i] < best:
			best, haveBest = vals[i], true
		}
	}
	if haveAppliance && haveBest && best > 0 {
		return fmt.Sprintf("%.2f×", appliance/best)
	}
	return "—"
}

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}

// perSample is r's CPU per sample ingested in the window (µs, which is also
// CPU s per million samples) spent in component c: c's share of the
// window's CPU profile times the CPU the process used in the window.
func perSample(r *result, c component) (float64, bool) {
	if r.cpu == nil || r.samplesWindow <= 0 || r.cpu.total == 0 {
		return 0, false
	}
	v := r.cpu.share(c) * r.cpuWindow.Seconds() / r.samplesWindow * 1e6
	return v, v >= 0.005 // "–" where the system has (next to) none
}

// breakdownMarkdown is the per-component table (issue 17's profile
// table) and, per system, what "other" holds.
func (rep *report) breakdownMarkdown() string {
	var b strings.Builder
	b.WriteString("\n## CPU per sample by component\n\n")
	us := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	figs := []harness.Figure[*result]{
		{Name: "CPU-s per million samples", Value: figures[0].Value, Unit: us},
		{Name: "peak RSS", Value: figures[1].Value, Unit: harness.Bytes},
	}
	for _, row := range componentRows {
		figs = append(figs, harness.Figure[*result]{
			Name:  row.title,
			Value: func(r *result) (float64, bool) { return perSample(r, row.c) },
			Unit:  us,
		})
	}
	cmp := harness.Comparison[*result]{
		Title:   title,
		Corner:  "µs of CPU per sample",
		Missing: "–",
		Figures: figs,
		Details: []harness.Detail[*result]{{Name: "profile CPU ÷ process CPU (window)", Cell: func(r *result) string {
			if r.cpu == nil || r.cpuWindow <= 0 {
				return "–"
			}
			return fmt.Sprintf("%.0f%%", float64(r.cpu.total)/float64(r.cpuWindow)*100)
		}}},
	}
	t := cmp.Table(rep.results)
	b.WriteString(t.Markdown())
	b.WriteString("\nEach row is the component's share of the CPU profile taken over the steady-state window " +
		"times the process's CPU per sample in that window, so the component rows add up to the first row " +
		"(the \"… of which\" row is part of the row above it). A stack counts for the first rule in " +
		"bench/ingest/components.go that one of its frames matches; the profile is written to " +
		"`<system>.cpu.pprof` in the run dir.\n")
	for _, r := range rep.results {
		if r.cpu == nil {
			if r.profileErr != nil {
				fmt.Fprintf(&b, "\n%s: no profile: %v\n", r.sys.Title, r.profileErr)
			}
			continue
		}
		if len(r.cpu.otherLeaves) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s, heaviest leaf functions in \"other\":", r.sys.Title)
		for i, f := range r.cpu.otherLeaves[:min(5, len(r.cpu.otherLeaves))] {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s `%s` %.1f%%", sep, f.name, float64(f.ns)/float64(r.cpu.total)*100)
		}
		b.WriteString(" of the profile.\n")
	}
	return b.String()
}
