package main

import (
	"cmp"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// The CPU profile of each system, taken over the measuring window, is split
// into components by the functions on each sample's stack, so that the
// report says which part of a system costs what per sample (issue 17's
// profile table).
//
// Attribution. A stack belongs to the component of the first rule, in the
// order of classRules, that one of its frames (any frame, inlined ones
// included) matches by prefix; a stack no rule matches is "other". The
// order is the priority: the more specific cost comes first, so that a
// stack scrape → our appender → VictoriaMetrics' AddRows → its series-ID
// lookup counts as the lookup, not as scraping, and the same AddRows under
// the downsampler's flush counts as storage append, not as the
// downsampler. A component may appear in several rules, at different
// priorities (Prometheus' tsdb package counts as storage append only below
// rules and PromQL, which read through it).

// component is one row of the breakdown.
type component string

const (
	compScrape       component = "scrape"
	compAdapter      component = "adapter"
	compHead         component = "head"
	compAppend       component = "append"
	compLookup       component = "lookup"
	compMerge        component = "merge"
	compDownsample   component = "downsample"
	compRecent       component = "recent"
	compRules        component = "rules"
	compGC           component = "gc"
	compHTTP         component = "http"
	compProbes       component = "probes"
	compHousekeeping component = "housekeeping"
	compSched        component = "sched"
	compOther        component = "other"
)

// componentRow is how a component is shown; part names the row a
// component's cost is also counted in ("… of which").
type componentRow struct {
	c     component
	title string
	part  component
}

// componentRows are the breakdown's rows in the order of the issue's
// table, then the ones the profiles showed matter.
var componentRows = []componentRow{
	{c: compScrape, title: "scrape + parse + scrape cache"},
	{c: compAdapter, title: "our adapter (ref → name map)"},
	{c: compHead, title: "our head + WAL (append side: add, log, flush, sweep)"},
	{c: compAppend, title: "storage append (Prometheus head+WAL / VM `AddRows`)"},
	{c: compLookup, title: "… of which VM's lookup of the series ID by full name", part: compAppend},
	{c: compMerge, title: "VM merges + compression"},
	{c: compDownsample, title: "downsampler (reading raw back, rollups)"},
	{c: compRecent, title: "rules' recent window, fed at commit"},
	{c: compRules, title: "rules + PromQL, other readers (SLO reports, dashboards' detectors, cardinality)"},
	{c: compGC, title: "GC (background marking, assists, sweeping)"},
	{c: compHTTP, title: "HTTP serving (self-metrics, API, pprof)"},
	{c: compProbes, title: "probes + local readings"},
	{c: compHousekeeping, title: "VM cache housekeeping (working-set cache watchers)"},
	{c: compSched, title: "Go scheduler, timers, netpoll"},
	{c: compOther, title: "other"},
}

// classRule assigns a stack with a frame starting with one of prefixes to
// c.
type classRule struct {
	c        component
	prefixes []string
}

const (
	vmLib     = "github.com/VictoriaMetrics/VictoriaMetrics/lib/"
	vmStorage = vmLib + "storage."
	promMod   = "github.com/prometheus/prometheus/"
	ours      = "github.com/aiserve/appliance/"
	ourStore  = ours + "storage."
)

// classRules are tried in order; see the comment at the top of the file.
var classRules = []classRule{
	{compGC, []string{
		"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep",
		"runtime.bgscavenge", "runtime.sweepone", "runtime.deductSweepCredit",
		"runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination",
		"runtime.GC", "runtime.forcegchelper", "runtime.(*mheap).reclaim",
	}},
	// VictoriaMetrics finds the TSID of every row by its full raw name
	// (tsidCache), unless the row before had the same name.
	{compLookup, []string{
		vmStorage + "(*Storage).getTSIDByMetricNameFromCache",
		vmStorage + "(*Storage).putTSIDByMetricNameToCache",
		vmStorage + "(*indexSearch).getTSIDByMetricName",
		vmStorage + "(*indexSearch).hasMetricID",
	}},
	// Merges of parts, and turning buffered rows and items into
	// compressed parts (also when AddRows does it inline).
	{compMerge, []string{
		vmLib + "mergeset.(*Table).flush", vmLib + "mergeset.(*Table).mustMerge",
		vmLib + "mergeset.(*Table).merge", vmLib + "mergeset.(*Table).createInmemoryPart",
		vmLib + "mergeset.(*Table).inmemoryPartsMerger", vmLib + "mergeset.(*Table).filePartsMerger",
		vmLib + "mergeset.(*Table).pendingItemsFlusher", vmLib + "mergeset.(*Table).inmemoryPartsFlusher",
		vmLib + "mergeset.(*Table).DebugFlush", vmLib + "mergeset.mergeBlockStreams",
		vmStorage + "(*partition).flush", vmStorage + "(*partition).mustMerge",
		vmStorage + "(*partition).merge", vmStorage + "(*partition).mustCreateInmemoryPart",
		vmStorage + "(*partition).inmemoryPartsMerger", vmStorage + "(*partition).smallPartsMerger",
		vmStorage + "(*partition).bigPartsMerger", vmStorage + "(*partition).inmemoryPartsFlusher",
		vmStorage + "(*partition).pendingRowsFlusher", vmStorage + "(*partition).DebugFlush",
		vmStorage + "mergeBlockStreams", vmStorage + "(*table).DebugFlush", vmStorage + "(*Storage).DebugFlush",
		vmLib + "filestream.", vmLib + "fs.MustCloseParallel", vmLib + "fs.MustWrite",
		promMod + "tsdb.(*LeveledCompactor)", promMod + "tsdb.(*DB).Compact",
	}},
	{compAppend, []string{
		vmStorage + "(*Storage).AddRows",
		vmStorage + "(*Storage).add",
		vmStorage + "(*Storage).updatePerDateData",
		vmStorage + "(*Storage).RegisterMetricNames",
		vmStorage + "(*table).MustAddRows",
		vmStorage + "(*partition).AddRows",
		"github.com/VictoriaMetrics/VictoriaMetrics/app/vmstorage.AddRows",
	}},
	// The write side of our head and write-ahead log; its reads count
	// as their reader's.
	{compHead, []string{
		ourStore + "(*head).add", ourStore + "(*head).flush", ourStore + "(*head).collect",
		ourStore + "(*head).sweep", ourStore + "(*headShard).create", ourStore + "(*headSeries).add",
		ourStore + "(*headSeries).dropPrev", ourStore + "(*wal).", ourStore + "(*DB).logCommit",
	}},
	{compDownsample, []string{
		ours + "downsample.",
		ourStore + "(*DB).Rollup", ourStore + "(*DB).rollupOld", ourStore + "(*rollupBatch)",
	}},
	{compRecent, []string{
		ourStore + "(*recentWindow).add", ourStore + "(*recentWindow).create",
		ourStore + "(*recentWindow).sweep", ourStore + "(*recentSeries).add",
	}},
	{compRules, []string{
		promMod + "rules.", promMod + "promql.", ours + "rules.", ours + "query.", ours + "slo.",
		"github.com/thanos-io/promql-engine/", ours + "cardinality.", ours + "ui/dashboard.",
		// VictoriaMetrics' searches in goroutines of their own, whose
		// stacks lose the reader that started them.
		vmStorage + "(*indexSearch)", vmStorage + "(*Search)", vmLib + "mergeset.(*TableSearch)",
	}},
	// Prometheus' head, WAL and chunks, below rules and PromQL, which
	// read through the same package.
	{compAppend, []string{promMod + "tsdb."}},
	{compAdapter, []string{
		ourStore + "(*appender)", ourStore + "(*seriesCache)", ourStore + "marshalRawName",
		ourStore + "(*DB).addRows", ourStore + "(*DB).teeCommit",
		// The appenders wrapped around ours on the way in.
		ours + "internal/histconv.", ours + "internal/exemplars.",
	}},
	// The scrape loops and parsers, and the HTTP client transport that
	// carries the scrapes (the only client traffic of a benchmark run).
	{compScrape, []string{
		promMod + "scrape.", promMod + "model/textparse.", "github.com/prometheus/common/expfmt.",
		vmLib + "promscrape", vmLib + "protoparser", "github.com/VictoriaMetrics/VictoriaMetrics/app/vminsert",
		ours + "scrape.", ours + "pipeline.", promMod + "discovery.",
		"net/http.(*persistConn)", "net/http.(*Transport)",
	}},
	{compProbes, []string{ours + "probe.", ours + "scrape/local.", ours + "thermal."}},
	{compHTTP, []string{
		"net/http.(*conn).serve", "net/http/pprof.", "github.com/labstack/echo", ours + "ui.",
		promMod + "web", vmLib + "httpserver", "github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect",
	}},
	{compHousekeeping, []string{vmLib + "workingsetcache.", "github.com/VictoriaMetrics/fastcache.(*Cache).UpdateStats"}},
	{compSched, []string{
		"runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.park_m",
		"runtime.sysmon", "runtime.goexit0", "runtime.netpoll", "runtime.mstart",
		"runtime.timerproc", "runtime.(*timers)",
	}},
}

// breakdown is a profile split into components.
type breakdown struct {
	total       int64 // CPU nanoseconds in the profile
	byComp      map[component]int64
	otherLeaves []funcCost // the heaviest leaf functions of "other", for checking the rules
}

type funcCost struct {
	name string
	ns   int64
}

// classify splits p's CPU samples into components by classRules.
func classify(p *profile.Profile) breakdown {
	vi := cpuValueIndex(p)
	b := breakdown{byComp: make(map[component]int64)}
	otherLeaf := make(map[string]int64)
	for _, s := range p.Sample {
		v := s.Value[vi]
		b.total += v
		c := classifyStack(s.Location)
		b.byComp[c] += v
		if c == compOther {
			otherLeaf[leafName(s.Location)] += v
		}
	}
	for name, ns := range otherLeaf {
		b.otherLeaves = append(b.otherLeaves, funcCost{name, ns})
	}
	slices.SortFunc(b.otherLeaves, func(x, y funcCost) int {
		return cmp.Or(cmp.Compare(y.ns, x.ns), strings.Compare(x.name, y.name))
	})
	return b
}

// cpuValueIndex is the index of the "cpu" sample value (nanoseconds) of a
// Go CPU profile; the last value when there is none by that name.
func cpuValueIndex(p *profile.Profile) int {
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			return i
		}
	}
	return len(p.SampleType) - 1
}

func classifyStack(locs []*profile.Location) component {
	for _, r := range classRules {
		for _, loc := range locs {
			for _, ln := range loc.Line {
				if ln.Function == nil {
					continue
				}
				for _, pre := range r.prefixes {
					if strings.HasPrefix(ln.Function.Name, pre) {
						return r.c
					}
				}
			}
		}
	}
	return compOther
}

// leafName is the innermost function of a stack.
func leafName(locs []*profile.Location) string {
	if len(locs) == 0 || len(locs[0].Line) == 0 || locs[0].Line[0].Function == nil {
		return "?"
	}
	return locs[0].Line[0].Function.Name
}

// share is the part of the profile's CPU spent in c, counting the rows
// that are part of it.
func (b breakdown) share(c component) float64 {
	if b.total == 0 {
		return 0
	}
	ns := b.byComp[c]
	for _, r := range componentRows {
		if r.part == c {
			ns += b.byComp[r.c]
		}
	}
	return float64(ns) / float64(b.total)
}
