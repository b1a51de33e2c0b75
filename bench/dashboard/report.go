package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

type report struct {
	opts       options
	data       dataPlan
	machine    harness.Machine
	bundle     int64
	dir        string
	stored     int
	loadNote   string
	loadTime   time.Duration
	settleNote string
	settleTime time.Duration
	results    []rangeResult
}

func median(ls []load, f func(load) float64) float64 {
	v := make([]float64, len(ls))
	for i, l := range ls {
		v[i] = f(l)
	}
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func ms(v float64) string {
	if math.IsInf(v, 1) {
		return fmt.Sprintf("> %.0f s (not drawn)", vmuiTimeout.Seconds())
	}
	return fmt.Sprintf("%.0f ms", v)
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Dashboard benchmark: the Overview vs vmui (%s)\n\n", harness.VictoriaMetrics.Title)
	fmt.Fprintf(&b, "- machine: %s\n", r.machine)
	fmt.Fprintf(&b, "- command: `go run ./bench/dashboard %s`\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "- data, the same in both: %d series stored (fleet of %d instances × %d series, the last %s at %s; history of %d series over %d days at %s, %d + %d samples)\n",
		r.stored, r.data.fleet.Instances, r.data.perInstance, r.opts.window, r.opts.interval,
		r.data.historySeries, r.opts.days, r.opts.historyInterval, r.data.fleetSamples(), r.data.historySamples())
	fmt.Fprintf(&b, "- load: %s in %s; settle: %s in %s\n", r.loadNote, r.loadTime.Round(time.Second), r.settleNote, r.settleTime.Round(time.Second))
	fmt.Fprintf(&b, "- dashboard bundle: %s gzipped (ui/web/dist/*.gz)\n", harness.Bytes(float64(r.bundle)))
	fmt.Fprintf(&b, "- browser: headless Chromium, %d×%d window, cache disabled; median of %d loads after one untimed (cold) load each\n", windowWidth, windowHeight, r.opts.runs)

	cache := "VictoriaMetrics with its rollup result cache (default settings), the appliance with its range cache"
	if !r.opts.vmCache {
		cache = "VictoriaMetrics with `-search.disableCache`, the appliance with its range cache"
	}
	fmt.Fprintf(&b, "- caches: %s; the cold first load is each range's untimed load (no earlier request at that range's steps)\n\n", cache)
	t := harness.Table{Header: []string{"range", "appliance: cold first load", "vmui: cold first load", "appliance Overview: data-ready", "(last answer)", "vmui: all panels drawn", "(last answer)", "vmui ÷ appliance", "panels (appliance / vmui)", "range queries (appliance / vmui)", "step", "tiers"}}
	for _, x := range r.results {
		a, v := median(x.app, func(l load) float64 { return l.ready }), median(x.vm, func(l load) float64 { return l.ready })
		t.AddRow(x.rng, ms(x.cold[0].ready), ms(x.cold[1].ready), ms(a), ms(median(x.app, func(l load) float64 { return l.queries })),
			ms(v), ms(median(x.vm, func(l load) float64 { return l.queries })),
			fmt.Sprintf("%.2f", v/a), fmt.Sprintf("%d / %d", x.appPanels, x.vmPanels),
			fmt.Sprintf("%d / %d", x.appQueries, x.vmQueries), x.step, x.tiers)
	}
	b.WriteString(t.Markdown())
	b.WriteString("\nEvery load, in ms (appliance | vmui):\n\n")
	for _, x := range r.results {
		var as, vs []string
		for i := range x.app {
			as = append(as, fmt.Sprintf("%.0f", x.app[i].ready))
			vs = append(vs, fmt.Sprintf("%.0f", x.vm[i].ready))
		}
		errs := 0
		for _, l := range x.vm {
			errs += l.errors
		}
		if errs > 0 {
			vs = append(vs, fmt.Sprintf("(%d vmui panels in all showed an error, see the log)", errs))
		}
		if x.vmTimedOut {
			vs = []string{ms(math.Inf(1)) + " on its untimed load, not timed again"}
		}
		fmt.Fprintf(&b, "- %s: %s | %s\n", x.rng, strings.Join(as, " "), strings.Join(vs, " "))
	}
	fmt.Fprintf(&b, "\nThe vmui dashboards and the logs are in %s.\n", r.dir)
	return b.String()
}
