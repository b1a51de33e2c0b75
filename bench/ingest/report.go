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

// figure is one row of the main table; lower is better for all of them.
type figure struct {
	name  string
	value func(r *result) (float64, bool)
	unit  func(v float64) string
}

var figures = []figure{
	{
		name: "CPU s per 1M samples (steady state)",
		value: func(r *result) (float64, bool) {
			if r.samplesWindow <= 0 {
				return 0, false
			}
			return r.cpuWindow.Seconds() / r.samplesWindow * 1e6, true
		},
		unit: func(v float64) string { return fmt.Sprintf("%.2f s", v) },
	},
	{
		name: "peak RSS",
		value: func(r *result) (float64, bool) {
			return float64(r.peakRSS), r.peakRSS > 0
		},
		unit: harness.Bytes,
	},
	{
		name: "disk bytes per sample",
		value: func(r *result) (float64, bool) {
			if r.samplesTotal <= 0 || r.disk.Files == 0 {
				return 0, false
			}
			return float64(r.disk.Allocated) / r.samplesTotal, true
		},
		unit: func(v float64) string { return fmt.Sprintf("%.2f B", v) },
	},
	{
		name: "p95 query_range latency (median)",
		value: func(r *result) (float64, bool) {
			if len(r.queries) == 0 || r.queryFailure != nil {
				return 0, false
			}
			return harness.Median(r.queries).Seconds(), true
		},
		unit: func(v float64) string { return fmtDuration(time.Duration(v * float64(time.Second))) },
	},
}

// details are rows that explain the figures; they get no ratio.
var details = []struct {
	name string
	cell func(r *result) string
}{
	{"fleet series per scrape (start → end)", func(r *result) string {
		if r.seriesPerScrape == 0 {
			return "—"
		}
		return fmt.Sprintf("%d → %d", r.seriesPerScrape, r.seriesAtEnd)
	}},
	{"samples ingested per s (window)", func(r *result) string {
		if r.window <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", r.samplesWindow/r.window.Seconds())
	}},
	{"CPU cores used (window)", func(r *result) string {
		if r.window <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.3f", r.cpuWindow.Seconds()/r.window.Seconds())
	}},
	{"samples ingested (start to stop)", func(r *result) string {
		if r.samplesTotal <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", r.samplesTotal)
	}},
	{"disk after stop (du / apparent)", func(r *result) string {
		if r.disk.Files == 0 {
			return "—"
		}
		return harness.Bytes(float64(r.disk.Allocated)) + " / " + harness.Bytes(float64(r.disk.Apparent))
	}},
	{"query min … max", func(r *result) string {
		if len(r.queries) == 0 {
			return "—"
		}
		lo, hi := r.queries[0], r.queries[0]
		for _, q := range r.queries {
			lo, hi = min(lo, q), max(hi, q)
		}
		return fmtDuration(lo) + " … " + fmtDuration(hi)
	}},
	{"query result (series × points)", func(r *result) string {
		if len(r.queries) == 0 {
			return "—"
		}
		return fmt.Sprintf("%d × %d", r.querySeries, r.queryPoints/max(1, r.querySeries))
	}},
	{"graceful stop", func(r *result) string {
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

	t := harness.Table{Header: []string{"metric"}}
	for _, r := range rep.results {
		t.Header = append(t.Header, r.sys.title)
	}
	t.Header = append(t.Header, "appliance ÷ best anchor")
	for _, f := range figures {
		row := []string{f.name}
		best, haveBest := math.Inf(1), false
		appliance, haveAppliance := 0.0, false
		for _, r := range rep.results {
			v, ok := f.value(r)
			if !ok {
				row = append(row, "—")
				continue
			}
			row = append(row, f.unit(v))
			if r.sys.name == "appliance" {
				appliance, haveAppliance = v, true
			} else if v < best {
				best, haveBest = v, true
			}
		}
		ratio := "—"
		if haveAppliance && haveBest && best > 0 {
			ratio = fmt.Sprintf("%.2f×", appliance/best)
		}
		t.AddRow(append(row, ratio)...)
	}
	for _, d := range details {
		row := []string{d.name}
		for _, r := range rep.results {
			row = append(row, d.cell(r))
		}
		t.AddRow(row...)
	}
	b.WriteString(t.Markdown())
	b.WriteString("\nLower is better for the first four rows; the ratio divides the appliance's figure by the better of the two anchors.\n")

	var failed []string
	for _, r := range rep.results {
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("- %s: %v", r.sys.name, r.err))
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
		fmt.Fprintf(&b, "- %s: %s\n", r.sys.title, r.sys.note)
	}

	b.WriteString("\n## Phases\n\n")
	for _, p := range rep.phases {
		fmt.Fprintf(&b, "- %s: %s\n", p.name, p.took.Round(time.Second))
	}
	return b.String()
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
