package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

type report struct {
	opts         options
	machine      harness.Machine
	started      time.Time
	load0, load1 string // load average at the start and the end
	results      []*result
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Alert latency, %s\n\n", r.started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Machine: %s. Load average (1m 5m 15m): %s at the start, %s at the end.\n\n", r.machine, r.load0, r.load1)
	goal := r.opts.interval + time.Second
	fmt.Fprintf(&b, "Scrape and evaluation every %s, %d repeats per system, one rule group per repeat, `flip_value{n=\"k\"} > 0` with `for: 0s`, "+
		"group_wait 0s, one new group per alert. Latency: webhook receipt minus the arrival of the first scrape "+
		"answered with the flipped value. Goal: ≤ one interval + 1 s = %s.\n\n", r.opts.interval, r.opts.repeats, goal)
	t := harness.Table{Header: []string{"system", "median", "max", "min", "alerts", "max ≤ goal"}}
	var base time.Duration
	for _, res := range r.results {
		if len(res.latencies) == 0 {
			t.AddRow(res.sys.Title, "–", "–", "–", fmt.Sprintf("0 of %d", r.opts.repeats), "no")
			continue
		}
		ls := slices.Clone(res.latencies)
		slices.Sort(ls)
		med := harness.Median(ls)
		if res.sys.Name == harness.Prometheus.Name {
			base = med
		}
		met := "yes"
		if ls[len(ls)-1] > goal || res.missed > 0 {
			met = "no"
		}
		t.AddRow(res.sys.Title, dur(med), dur(ls[len(ls)-1]), dur(ls[0]),
			fmt.Sprintf("%d of %d", len(ls), r.opts.repeats), met)
	}
	b.WriteString(t.Markdown())
	for _, res := range r.results {
		if res.sys.Name == harness.Appliance.Name && len(res.latencies) > 0 && base > 0 {
			fmt.Fprintf(&b, "\nappliance median ÷ Prometheus + Alertmanager median: %.2f×\n", float64(harness.Median(res.latencies))/float64(base))
		}
	}
	for _, res := range r.results {
		if res.err != nil {
			fmt.Fprintf(&b, "\n%s: %v\n", res.sys.Name, res.err)
		}
	}
	b.WriteString("\nEvery latency, in order:\n\n")
	for _, res := range r.results {
		parts := make([]string, len(res.latencies))
		for i, l := range res.latencies {
			parts[i] = dur(l)
		}
		fmt.Fprintf(&b, "- %s: %s\n", res.sys.Name, strings.Join(parts, ", "))
	}
	return b.String()
}

func dur(d time.Duration) string { return d.Round(time.Millisecond).String() }
