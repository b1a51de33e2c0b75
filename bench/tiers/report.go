package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/bench/history"
)

type phaseTime struct {
	name string
	d    time.Duration
	note string
}

type queryResult struct {
	latencies      []time.Duration
	series, points int
	mean           float64
	tiers          string
}

type sysResult struct {
	title     string
	phases    []phaseTime
	queries   map[string]*queryResult
	disk      harness.DiskUsage
	caches    int64 // allocated bytes of VictoriaMetrics cache dirs, part of disk
	tierStats []tierStat
	queryLoad string // the load average when its queries were done
}

type report struct {
	opts    options
	cfg     history.Config
	series  int
	samples int64
	machine harness.Machine
	outDir  string
	order   []string
	results map[string]*sysResult
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Tiers benchmark, %s\n\n", time.Now().UTC().Format(time.DateTime+" UTC"))
	fmt.Fprintf(&b, "Machine: %s.\n\n", r.machine)
	fmt.Fprintf(&b, "Data: %d models × %d instances = %d series (32 each: 22 e2e latency buckets, _sum, _count, 3 request_success_total, 2 token counters, 3 gauges), "+
		"every %s from %s to %s (%d days less the first %s): **%d samples** (%.1fM). Seed %d.\n\n",
		r.cfg.Models, r.cfg.Instances, r.series, r.cfg.Interval, r.cfg.Start.Format(time.DateTime), r.cfg.End.Format(time.DateTime),
		r.opts.days, guard, r.samples, float64(r.samples)/1e6, r.opts.seed)

	var anchors []string
	app, haveApp := r.results["appliance"]
	for _, name := range r.order {
		if name != "appliance" {
			anchors = append(anchors, name)
		}
	}

	// Queries.
	hdr := []string{"query", "range", "step"}
	for _, name := range r.order {
		hdr = append(hdr, r.results[name].title)
	}
	if haveApp && len(anchors) > 0 {
		hdr = append(hdr, "appliance ÷ faster anchor")
		for _, a := range anchors {
			hdr = append(hdr, r.results[a].title+" ÷ appliance")
		}
		hdr = append(hdr, "appliance tiers")
	}
	qt := harness.Table{Header: hdr}
	ct := harness.Table{Header: append([]string{"query", "range"}, hdr[3:3+len(r.order)]...)}
	for _, q := range benchQueries {
		for _, rng := range queryRanges(r.opts.days) {
			key := queryKey(q.name, rng)
			_, _, step := queryWindow(r.cfg.End, rng)
			row := []string{q.name, rangeName(rng), step.String()}
			crow := []string{q.name, rangeName(rng)}
			var best time.Duration
			for _, name := range r.order {
				qr := r.results[name].queries[key]
				m := harness.Median(qr.latencies)
				row = append(row, ms(m))
				crow = append(crow, fmt.Sprintf("%d / %d / %.4g", qr.series, qr.points, qr.mean))
				if name != "appliance" && (best == 0 || m < best) {
					best = m
				}
			}
			if haveApp && len(anchors) > 0 {
				qa := app.queries[key]
				m := float64(harness.Median(qa.latencies))
				row = append(row, fmt.Sprintf("%.3f", m/float64(best)))
				for _, a := range anchors {
					row = append(row, fmt.Sprintf("%.2f×", float64(harness.Median(r.results[a].queries[key].latencies))/m))
				}
				row = append(row, qa.tiers)
			}
			qt.AddRow(row...)
			ct.AddRow(crow...)
		}
	}
	fmt.Fprintf(&b, "### query_range, median of %d after %d untimed (wall time, loopback)\n\n%s\n", r.opts.queries, r.opts.warm, qt.Markdown())
	fmt.Fprintf(&b, "p95 latency = `%s`; max queue = `%s`. Ranges end at %s; the step is range/500, rounded to whole 5 minutes from 7 days on, up to whole 15 s below. "+
		"Goals (issue 17): every range from 1h to 7d at least as fast as VictoriaMetrics (ratio ≤ 1); at 30 and 90 days ≥ 5× faster than VictoriaMetrics and ≥ 20× faster than Prometheus.\n\n",
		benchQueries[0].expr, benchQueries[1].expr, r.cfg.End.Format(time.DateTime))
	var loads []string
	for _, name := range r.order {
		loads = append(loads, r.results[name].title+" "+r.results[name].queryLoad)
	}
	fmt.Fprintf(&b, "Load average (1, 5, 15 min) when each system's queries ended: %s.\n\n", strings.Join(loads, "; "))
	if r.opts.reuse != "" {
		fmt.Fprintf(&b, "Data backfilled by an earlier run, reused from %s (no backfill or settling in this run).\n\n", r.opts.reuse)
	}
	fmt.Fprintf(&b, "What each answered (series / points / mean of all values), to show they answered the same question:\n\n%s\n", ct.Markdown())

	// Disk.
	dt := harness.Table{Header: []string{"", "disk (du)", "of which VictoriaMetrics caches", "bytes per sample", "÷ VictoriaMetrics"}}
	vm, haveVM := r.results["victoriametrics"]
	for _, name := range r.order {
		res := r.results[name]
		ratio := ""
		if haveVM {
			ratio = fmt.Sprintf("%.3f", float64(res.disk.Allocated)/float64(vm.disk.Allocated))
		}
		dt.AddRow(res.title, harness.Bytes(float64(res.disk.Allocated)), harness.Bytes(float64(res.caches)),
			fmt.Sprintf("%.3f", float64(res.disk.Allocated)/float64(r.samples)), ratio)
	}
	fmt.Fprintf(&b, "### Disk after backfill and settling (allocated bytes of the data dir after a graceful stop)\n\n%s\nGoal: appliance ≤ 0.3 × VictoriaMetrics.\n\n", dt.Markdown())
	if haveApp && len(app.tierStats) > 0 {
		tt := harness.Table{Header: []string{"appliance tier", "retention", "series", "rows", "disk (its own count)", "watermark"}}
		for _, t := range app.tierStats {
			wm := ""
			if t.Watermark != nil {
				wm = *t.Watermark
			}
			tt.AddRow(t.Tier, t.Retention, fmt.Sprint(t.Series), fmt.Sprint(t.Samples), harness.Bytes(float64(t.DiskBytes)), wm)
		}
		fmt.Fprintf(&b, "Appliance tiers (`/api/v1/status/tiers` before the stop):\n\n%s\n", tt.Markdown())
	}

	// Phases.
	pt := harness.Table{Header: []string{"system", "phase", "time", "note"}}
	for _, name := range r.order {
		for _, p := range r.results[name].phases {
			pt.AddRow(r.results[name].title, p.name, p.d.String(), p.note)
		}
	}
	fmt.Fprintf(&b, "### Phases\n\n%s\nLogs: %s\n", pt.Markdown(), r.outDir)
	return b.String()
}
