package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/require"
)

// stackProfile builds a Go-like CPU profile (samples/count, cpu/nanoseconds)
// with one sample per stack, stacks given from the root down as function
// names; a name "a|b" is one location where b was inlined into a.
type stackProfile struct {
	p     *profile.Profile
	funcs map[string]*profile.Function
}

func newStackProfile() *stackProfile {
	return &stackProfile{
		p: &profile.Profile{
			SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
			PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
			Period:     10_000_000,
		},
		funcs: make(map[string]*profile.Function),
	}
}

func (sp *stackProfile) fn(name string) *profile.Function {
	if f, ok := sp.funcs[name]; ok {
		return f
	}
	f := &profile.Function{ID: uint64(len(sp.p.Function) + 1), Name: name, SystemName: name}
	sp.p.Function = append(sp.p.Function, f)
	sp.funcs[name] = f
	return f
}

// add adds a sample of ns nanoseconds with the stack root → … → leaf.
func (sp *stackProfile) add(ns int64, rootToLeaf ...[]string) {
	var locs []*profile.Location
	for i := len(rootToLeaf) - 1; i >= 0; i-- {
		loc := &profile.Location{ID: uint64(len(sp.p.Location) + 1)}
		// pprof lists a location's lines innermost (inlined) first.
		frames := rootToLeaf[i]
		for j := len(frames) - 1; j >= 0; j-- {
			loc.Line = append(loc.Line, profile.Line{Function: sp.fn(frames[j])})
		}
		sp.p.Location = append(sp.p.Location, loc)
		locs = append(locs, loc)
	}
	sp.p.Sample = append(sp.p.Sample, &profile.Sample{Location: locs, Value: []int64{ns / 10_000_000, ns}})
}

func frames(names ...string) [][]string {
	out := make([][]string, len(names))
	for i, n := range names {
		out[i] = []string{n}
	}
	return out
}

const (
	promScrape = promMod + "scrape.(*scrapeLoop).append"
	commit     = ourStore + "(*appender).Commit"
	addRows    = vmStorage + "(*Storage).AddRows"
	vmAdd      = vmStorage + "(*Storage).add"
)

// Each stack of the table lands in its row, whatever else is on
// the stack; a change of classRules that moves one fails here.
func TestClassifyAttributesByPriority(t *testing.T) {
	sp := newStackProfile()
	ms := int64(time.Millisecond)
	// Scrape → our appender → AddRows → the series-ID lookup.
	sp.add(1*ms, frames(promScrape, commit, ourStore+"(*DB).addRows", addRows, vmAdd,
		vmStorage+"(*Storage).getTSIDByMetricNameFromCache", "github.com/VictoriaMetrics/fastcache.(*Cache).Get")...)
	// Scrape → our appender → AddRows, outside the lookup.
	sp.add(2*ms, frames(promScrape, commit, addRows, vmAdd, "runtime.memmove")...)
	// Scrape → our appender → the head.
	sp.add(4*ms, frames(promScrape, commit, ourStore+"(*head).add", "runtime.mapaccess2")...)
	// Scrape → our appender's ref → name map.
	sp.add(8*ms, frames(promScrape, commit, ourStore+"(*seriesCache).get")...)
	// Scrape and parse only.
	sp.add(16*ms, frames(promScrape, promMod+"model/textparse.(*PromParser).Next")...)
	// The downsampler's flush writes the head to VictoriaMetrics: append.
	sp.add(32*ms, frames(ours+"downsample.(*Downsampler).Run", ourStore+"(*DB).Flush", ourStore+"(*head).flush", addRows, vmAdd)...)
	// ... and flushes its parts: merges.
	sp.add(64*ms, frames(ours+"downsample.(*Downsampler).Run", ourStore+"(*DB).Flush", vmStorage+"(*Storage).DebugFlush",
		vmStorage+"(*partition).flushPendingRows", "github.com/VictoriaMetrics/VictoriaMetrics/lib/encoding.MarshalInt64s")...)
	// The downsampler reading raw back is the downsampler's, VictoriaMetrics' search and all.
	sp.add(128*ms, frames(ours+"downsample.(*Downsampler).Run", ourStore+"(*DB).Rollup", ourStore+"(*DB).scanSeries",
		vmStorage+"(*Search).NextMetricBlock", "github.com/VictoriaMetrics/VictoriaMetrics/lib/encoding.UnmarshalInt64s")...)
	// A background merge.
	sp.add(256*ms, frames(vmStorage+"(*partition).smallPartsMerger", vmStorage+"(*partition).mergeParts")...)
	// GC, in the background and as an assist in a scrape.
	sp.add(512*ms, frames("runtime.gcBgMarkWorker", "runtime.scanobject")...)
	sp.add(1024*ms, frames(promScrape, "runtime.mallocgc", "runtime.gcAssistAlloc", "runtime.scanobject")...)
	// Rules read through Prometheus' tsdb: rules, not append.
	sp.add(2048*ms, frames(promMod+"rules.(*Group).Eval", promMod+"promql.(*Engine).exec", promMod+"tsdb.(*blockQuerier).Select")...)
	// Prometheus' own scrape appending to its head: append.
	sp.add(4096*ms, frames(promScrape, promMod+"tsdb.(*headAppender).Append")...)
	// An inlined frame counts: scrape.(*scrapeLoop).append inlined into its caller.
	sp.add(8192*ms, [][]string{{promMod + "scrape.(*scrapeLoop).run", promScrape}, {"runtime.memclrNoHeapPointers"}}...)
	// Nothing known: other, listed by its leaf.
	sp.add(16384*ms, frames("syscall.Syscall6", "internal/runtime/syscall.Syscall6")...)

	// Through the wire format, as the benchmark reads it.
	var buf bytes.Buffer
	require.NoError(t, sp.p.Write(&buf))
	p, err := profile.Parse(&buf)
	require.NoError(t, err)

	b := classify(p)
	require.Equal(t, 32767*ms, b.total)
	require.Equal(t, map[component]int64{
		compLookup:     1 * ms,
		compAppend:     (2 + 32 + 4096) * ms,
		compHead:       4 * ms,
		compAdapter:    8 * ms,
		compScrape:     (16 + 8192) * ms,
		compMerge:      (64 + 256) * ms,
		compDownsample: 128 * ms,
		compGC:         (512 + 1024) * ms,
		compRules:      2048 * ms,
		compOther:      16384 * ms,
	}, b.byComp)
	require.Equal(t, []funcCost{{"internal/runtime/syscall.Syscall6", 16384 * ms}}, b.otherLeaves)
	// The lookup is part of storage append.
	require.InDelta(t, float64(2+32+4096+1)/32767, b.share(compAppend), 1e-12)
	require.InDelta(t, float64(1)/32767, b.share(compLookup), 1e-12)
}

// Every rule's component has a row, and every row but "other" a rule.
func TestEveryComponentHasARowAndARule(t *testing.T) {
	rows := make(map[component]bool)
	for _, r := range componentRows {
		rows[r.c] = true
	}
	ruled := map[component]bool{compOther: true}
	for _, r := range classRules {
		require.True(t, rows[r.c], "rule for %s without a row", r.c)
		ruled[r.c] = true
	}
	for c := range rows {
		require.True(t, ruled[c], "row %s without a rule", c)
	}
}

// The report's per-sample figures scale the profile's shares to the CPU
// the process used per sample in the window.
func TestPerSampleScalesSharesToProcessCPU(t *testing.T) {
	r := &result{
		cpu:           &breakdown{total: 100, byComp: map[component]int64{compScrape: 25, compAppend: 50, compLookup: 25}},
		cpuWindow:     7 * time.Second,
		samplesWindow: 1e6,
	}
	v, ok := perSample(r, compScrape)
	require.True(t, ok)
	require.InDelta(t, 1.75, v, 1e-9)
	v, ok = perSample(r, compAppend) // with its lookup
	require.True(t, ok)
	require.InDelta(t, 5.25, v, 1e-9)
	_, ok = perSample(r, compGC)
	require.False(t, ok, "a component with no samples is shown as missing")

	rep := &report{results: []*result{r}}
	r.sys = systems[2]
	md := rep.breakdownMarkdown()
	require.Regexp(t, `\| scrape \+ parse \+ scrape cache +\| +1\.75 \|`, md)
	require.Regexp(t, `\| storage append [^|]+\| +5\.25 \|`, md)
	require.Regexp(t, `\| GC [^|]+\| +– \|`, md)
}
