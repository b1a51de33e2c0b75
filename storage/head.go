package storage

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
)

// The head holds the samples committed to the raw tier that
// VictoriaMetrics may not show yet, and queries of the raw tier read it
// together with VictoriaMetrics, so a sample is queryable as soon as its
// Commit returns (issue 15: within a second; before the head, 6-20 s for a
// new series).
//
// Why VictoriaMetrics shows a sample late. AddRows buffers rows per shard
// and makes them searchable every 2 s (pendingRowsFlushInterval) or when a
// buffer fills; a new series' index entries wait up to 1 s
// (pendingItemsFlushInterval); and a search that ran before the entries
// were searchable leaves its answer (without the new series) in the
// tag-filters cache, which is reset only every 10 s after new index
// entries (defaultFlushCallbackInterval). Only DebugFlush does all three
// at once, and calling it at every commit would make a part per commit.
//
// Generations. Every sample in the head belongs to the generation that was
// current when it was added; a flush (DB.Flush, which the downsampler calls
// before it reads raw, about once a minute, or a Commit when nothing
// flushed for headFlushAfter) closes the current generation, writes it to
// VictoriaMetrics (HeadBatchWrites), calls DebugFlush and then marks
// the closed generation flushed: its samples are searchable in
// VictoriaMetrics and the head stops returning them. With HeadBatchWrites
// off a Commit adds its rows to the head after AddRows returned, so a row
// of a closed generation was given to VictoriaMetrics before the
// DebugFlush that followed the close; with it on the flush writes them.
// Flushes are serialized, so when generation g is current every generation
// up to g-2 is flushed: a series keeps at most two generations of samples.
// A series' entry (its buffers, its place in byName) outlives its samples
// until it got none for headSeriesIdle: flushes come in bursts (the
// downsampler flushes before each read of raw), and dropping the entries
// of every series that missed two of them rebuilt most of the head at each
// burst (issue 17's profile: 1.5 µs per sample in create, new buffers and
// sweep at 100,000 series).
//
// Reads. A query reads the head before VictoriaMetrics: a sample the head
// no longer returns was flushed before the head was read, so the search
// that follows finds it. The two answers are merged per series and
// de-duplicated as VictoriaMetrics' own duplicates are (sortAndDedup).
//
// Cost: the samples of one to two flush intervals (at 100,000 series every
// 5 s and a 30 s flush, up to 1.2 million samples of 16 bytes) and about
// 100 bytes per series that received a sample since the last flush but
// one; the raw names are shared with the appenders' series cache. Labels
// are decoded from the raw name at read time, only for the series of the
// metric names a selector's __name__ matchers accept when it has any, else
// for every series the head holds.

const (
	// headShards splits the head's locks: commits of concurrent scrapes
	// touch different shards.
	headShards = 16
	// headFlushAfter is how long the head may go without a flush before a
	// Commit flushes the raw tier itself: between the downsampler's
	// once-a-minute reads of raw, and when it is not running (tests,
	// tools). walKeep counts on it.
	headFlushAfter = 30 * time.Second
	// headSeriesIdle is how long a series' entry stays in the head after
	// its last sample: longer than any usual scrape interval, so a live
	// series keeps its entry and buffers from flush to flush.
	headSeriesIdle = 5 * time.Minute
)

// head is safe for concurrent use.
type head struct {
	// gen is the current generation; every generation up to flushed is
	// searchable in VictoriaMetrics.
	gen, flushed atomic.Uint64
	// addMu is held for reading by add (from loading gen to the last
	// row) and for writing by flush to close the generation: after the
	// close no add puts a sample into the closed generation, which a
	// batched flush relies on to write all of it.
	addMu sync.RWMutex
	// write, when set (Options.HeadBatchWrites), hands a closed
	// generation's samples to VictoriaMetrics at flush, each series' samples
	// next to each other; Commit then does not call AddRows itself.
	write func([]vmstorage.MetricRow) error
	// rows is flush's buffer for write: one shard's samples at a time, so
	// it is reused from flush to flush (all of a flush at 100,000 series,
	// about a million rows, was a new 40-50 MB buffer each time: a third
	// of the bytes the appliance allocated in issue 17's ingest run).
	rows []vmstorage.MetricRow
	// flushMu serializes flushes; lastFlush is the wall-clock time (ms)
	// the last one ended.
	flushMu   sync.Mutex
	lastFlush atomic.Int64
	wall      func() time.Time

	shards [headShards]headShard
}

type headShard struct {
	mu     sync.RWMutex
	series map[uint64]*headSeries
	// byName lists the series of each metric name, for selectors that
	// name one.
	byName map[string][]*headSeries
	_      [40]byte // keep shards on separate cache lines
}

// headSeries holds the head's samples of one series in the order they were
// added: ts[:split] of generation gen-1, ts[split:] of generation gen.
type headSeries struct {
	raw   []byte // VictoriaMetrics raw metric name, shared with seriesCache
	name  string // metric name (a byName key)
	gen   uint64
	split int
	// seen is the wall-clock time (ms) of the add that brought the last
	// sample; dropped is set when sweep or delete removes the entry.
	seen    int64
	dropped bool
	ts      []int64
	vs      []float64
}

func newHead(wall func() time.Time) *head {
	if wall == nil {
		wall = time.Now
	}
	h := &head{wall: wall}
	h.gen.Store(1)
	h.lastFlush.Store(wall().UnixMilli())
	for i := range h.shards {
		h.shards[i].series = make(map[uint64]*headSeries)
		h.shards[i].byName = make(map[string][]*headSeries)
	}
	return h
}

// add keeps rows (refs and ents parallel; ents may be nil) in the current
// generation; an entry of ents keeps the row's series for the next add,
// which then skips the head's map. Commit calls it
// after VictoriaMetrics took the rows (unless the head batches writes). It
// returns the rows it did not keep, appended to skipped: those whose ref
// the head holds for another name. A ref is the labels' hash and the
// series cache tells colliding label sets apart only while it holds both,
// so two series may share a ref over time (about 1e-8 odds at a million
// series); such a row is left to VictoriaMetrics alone.
func (h *head) add(rows []vmstorage.MetricRow, refs []uint64, ents []*seriesEntry, skipped []vmstorage.MetricRow) []vmstorage.MetricRow {
	h.addMu.RLock()
	defer h.addMu.RUnlock()
	g := h.gen.Load()
	now := h.wall().UnixMilli()
	for i := range rows {
		r := &rows[i]
		sh := &h.shards[refs[i]%headShards]
		sh.mu.Lock()
		var s *headSeries
		if ents != nil && ents[i].head != nil && !ents[i].head.dropped {
			s = ents[i].head // the entry's name is the row's
		} else {
			s = sh.series[refs[i]]
			switch {
			case s == nil:
				s = sh.create(refs[i], r.MetricNameRaw, g)
			case !sameName(s.raw, r.MetricNameRaw):
				sh.mu.Unlock()
				skipped = append(skipped, *r)
				continue
			}
			if ents != nil {
				ents[i].head = s
			}
		}
		s.add(r.Timestamp, r.Value, g)
		s.seen = now
		sh.mu.Unlock()
	}
	return skipped
}

// sameName compares raw names, at once when both are the series cache's
// copy (the common case).
func sameName(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || bytes.Equal(a, b)
}

// create adds a series; sh.mu is held.
func (sh *headShard) create(ref uint64, raw []byte, g uint64) *headSeries {
	s := &headSeries{raw: raw, gen: g}
	name, _ := rawMetricGroup(raw)
	list, ok := sh.byName[string(name)]
	if ok && len(list) > 0 {
		s.name = list[0].name
	} else {
		s.name = string(name)
	}
	sh.byName[s.name] = append(list, s)
	sh.series[ref] = s
	return s
}

// add appends a sample added in generation g. Samples of generations up
// to g-2 are flushed (see the file comment) and are dropped here. g is
// never older than s.gen (add holds addMu from loading it); if it were,
// the sample would be kept with the newer generation: kept longer, never
// dropped early.
func (s *headSeries) add(t int64, v float64, g uint64) {
	switch {
	case g == s.gen+1:
		s.dropPrev()
		s.split, s.gen = len(s.ts), g
	case g > s.gen+1:
		s.ts, s.vs = s.ts[:0], s.vs[:0]
		s.split, s.gen = 0, g
	}
	s.ts = append(s.ts, t)
	s.vs = append(s.vs, v)
}

// drop marks s removed from the head (a series cache entry may still
// point to it: add then looks the series up again) and frees its buffers.
// The shard's mu is held.
func (s *headSeries) drop() {
	s.dropped = true
	s.ts, s.vs, s.split = nil, nil, 0
}

// dropPrev drops the samples of generation gen-1, keeping the buffers.
func (s *headSeries) dropPrev() {
	if s.split == 0 {
		return
	}
	n := copy(s.ts, s.ts[s.split:])
	copy(s.vs, s.vs[s.split:])
	s.ts, s.vs, s.split = s.ts[:n], s.vs[:n], 0
}

// visible returns the part of s's samples not yet known flushed.
func (s *headSeries) visible(flushed uint64) (ts []int64, vs []float64) {
	switch {
	case s.gen <= flushed:
		return nil, nil
	case s.gen-1 <= flushed:
		return s.ts[s.split:], s.vs[s.split:]
	default:
		return s.ts, s.vs
	}
}

// flush closes the current generation, writes its samples to
// VictoriaMetrics when the head batches writes, runs flushVM (which must
// make everything VictoriaMetrics took searchable: DebugFlush) and marks
// the closed generation flushed. Only one flush runs at a time; with wait
// false, flush returns at once when another is running. It returns the
// error of the first failed batched write (one per shard); those samples
// are then lost to VictoriaMetrics (they stay in the WAL until it is
// trimmed), as a failed AddRows in Commit loses them.
func (h *head) flush(flushVM func(), wait bool) (err error) {
	if wait {
		h.flushMu.Lock()
	} else if !h.flushMu.TryLock() {
		return nil
	}
	defer h.flushMu.Unlock()
	h.addMu.Lock()
	closed := h.gen.Add(1) - 1
	h.addMu.Unlock()
	if h.write != nil {
		for i := range h.shards {
			h.rows = h.collect(closed, &h.shards[i], h.rows[:0])
			if len(h.rows) > 0 {
				if werr := h.write(h.rows); werr != nil && err == nil {
					err = werr
				}
			}
			clear(h.rows) // drop references to the names
		}
		if cap(h.rows) > maxPooledRows {
			h.rows = nil
		}
	}
	flushVM()
	h.flushed.Store(closed)
	now := h.wall().UnixMilli()
	h.lastFlush.Store(now)
	h.sweep(closed, now)
	return err
}

// collect appends the samples of generation g in shard sh to dst, series
// by series: VictoriaMetrics looks a series up once for consecutive rows
// of the same name (35-50% of AddRows' cost with 2-3 samples per series,
// issue 17). No add runs in g any more (flush closed it).
func (h *head) collect(g uint64, sh *headShard, dst []vmstorage.MetricRow) []vmstorage.MetricRow {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	for _, s := range sh.series {
		var ts []int64
		var vs []float64
		switch {
		case s.gen == g:
			ts, vs = s.ts[s.split:], s.vs[s.split:]
		case s.gen == g+1:
			ts, vs = s.ts[:s.split], s.vs[:s.split]
		}
		for j, t := range ts {
			dst = append(dst, vmstorage.MetricRow{MetricNameRaw: s.raw, Timestamp: t, Value: vs[j]})
		}
	}
	return dst
}

// due says whether a Commit should flush: nothing has for headFlushAfter.
func (h *head) due() bool {
	return h.wall().UnixMilli()-h.lastFlush.Load() >= headFlushAfter.Milliseconds()
}

// sweep drops the samples of generations up to flushed, and the series
// without samples whose last came headSeriesIdle or longer before now (ms):
// a series scraped every interval keeps its entry and buffers from flush
// to flush.
func (h *head) sweep(flushed uint64, now int64) {
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		dropped := false
		for ref, s := range sh.series {
			switch {
			case s.gen < flushed && now-s.seen >= headSeriesIdle.Milliseconds():
				delete(sh.series, ref)
				s.drop()
				dropped = true
			case s.gen <= flushed:
				s.ts, s.vs, s.split = s.ts[:0], s.vs[:0], 0
			case s.gen-1 == flushed:
				s.dropPrev()
			}
		}
		if dropped {
			for name, list := range sh.byName {
				keep := list[:0]
				for _, s := range list {
					if !s.dropped {
						keep = append(keep, s)
					}
				}
				clear(list[len(keep):])
				if len(keep) == 0 {
					delete(sh.byName, name)
				} else {
					sh.byName[name] = keep
				}
			}
		}
		sh.mu.Unlock()
	}
}

// read returns the series matching ms with samples in [mint, maxt] not yet
// flushed, sorted by timestamp and de-duplicated; with labelsOnly, their
// labels only. Only the series that match have their labels decoded.
func (h *head) read(ms []*labels.Matcher, mint, maxt int64, labelsOnly bool) []*series {
	var (
		out []*series
		mn  vmstorage.MetricName
		b   labels.ScratchBuilder
	)
	h.each(ms, mint, maxt, func(s *headSeries, ts []int64, vs []float64) {
		if err := mn.UnmarshalRaw(s.raw); err != nil {
			return // cannot happen: Commit marshalled it
		}
		got := &series{lset: metricNameToLabels(&b, &mn)}
		if !labelsOnly {
			for j, t := range ts {
				if t >= mint && t <= maxt {
					got.ts = append(got.ts, t)
					got.vs = append(got.vs, vs[j])
				}
			}
			got.sortAndDedup()
		}
		out = append(out, got)
	})
	return out
}

// each calls fn, under the series' shard's read lock, for every series
// matching ms with a sample in [mint, maxt] not yet flushed, with its
// unflushed samples (all of them, in the order added). The matchers are
// tested on the raw name: a selector that names no metric and matches a
// label few series have (the release detector's) visits every series, and
// decoding each one's labels to test them was most of a read's cost
// (issue 17's ingest profile).
func (h *head) each(ms []*labels.Matcher, mint, maxt int64, fn func(s *headSeries, ts []int64, vs []float64)) {
	flushed := h.flushed.Load()
	name, named := selectedName(ms)
	var nameMs, rest []*labels.Matcher
	for _, m := range ms {
		if m.Name == labels.MetricName {
			nameMs = append(nameMs, m)
		} else {
			rest = append(rest, m)
		}
	}
	inRange := func(t int64) bool { return t >= mint && t <= maxt }
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		visit := func(s *headSeries) {
			ts, vs := s.visible(flushed)
			if slices.ContainsFunc(ts, inRange) && matchesAllRaw(rest, s.raw) {
				fn(s, ts, vs)
			}
		}
		switch {
		case named:
			if list := sh.byName[name]; len(list) > 0 && matchesAllValue(nameMs, name) {
				for _, s := range list {
					visit(s)
				}
			}
		case len(nameMs) > 0:
			// `{__name__=~"vllm:.*"}`: test the names, not every series.
			for metric, list := range sh.byName {
				if matchesAllValue(nameMs, metric) {
					for _, s := range list {
						visit(s)
					}
				}
			}
		default:
			for _, s := range sh.series {
				visit(s)
			}
		}
		sh.mu.RUnlock()
	}
}

// matchesAllRaw is matchesAll on a raw name: a label the name lacks has
// the empty value. ms must not test __name__ (each tests the metric names
// apart).
func matchesAllRaw(ms []*labels.Matcher, raw []byte) bool {
	for _, m := range ms {
		v := rawLabelValue(raw, m.Name)
		var ok bool
		switch m.Type {
		case labels.MatchEqual:
			ok = string(v) == m.Value
		case labels.MatchNotEqual:
			ok = string(v) != m.Value
		default:
			ok = m.Matches(string(v))
		}
		if !ok {
			return false
		}
	}
	return true
}

// rawLabelValue returns the value of label name in a raw name (the format
// of marshalRawName), nil when it has none.
func rawLabelValue(raw []byte, name string) []byte {
	if name == labels.MetricName {
		name = ""
	}
	for len(raw) > 0 {
		kl, vl, ok := rawLabelLens(raw)
		if !ok {
			return nil
		}
		if string(raw[2:2+kl]) == name {
			return raw[4+kl : 4+kl+vl]
		}
		raw = raw[4+kl+vl:]
	}
	return nil
}

func matchesAllValue(ms []*labels.Matcher, v string) bool {
	for _, m := range ms {
		if !m.Matches(v) {
			return false
		}
	}
	return true
}

// size returns the series and samples the head holds.
func (h *head) size() (series, samples int) {
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		series += len(sh.series)
		for _, s := range sh.series {
			samples += len(s.ts)
		}
		sh.mu.RUnlock()
	}
	return series, samples
}

// delete drops the series matching ms (DB.Delete): the head must not show
// them, nor write them later.
func (h *head) delete(ms []*labels.Matcher) {
	var mn vmstorage.MetricName
	var b labels.ScratchBuilder
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for ref, s := range sh.series {
			if err := mn.UnmarshalRaw(s.raw); err != nil || !matchesAll(ms, metricNameToLabels(&b, &mn)) {
				continue
			}
			delete(sh.series, ref)
			s.drop()
			list := slices.DeleteFunc(sh.byName[s.name], func(o *headSeries) bool { return o == s })
			if len(list) == 0 {
				delete(sh.byName, s.name)
			} else {
				sh.byName[s.name] = list
			}
		}
		sh.mu.Unlock()
	}
}

// labelValues returns the values of label name on the head's series
// matching ms with samples in [mint, maxt] not yet flushed, each once,
// unsorted. The metric
// names without other matchers (Grafana's metric browser) come from the
// name index without decoding a series.
func (h *head) labelValues(name string, ms []*labels.Matcher, mint, maxt int64) []string {
	if name != labels.MetricName || len(ms) > 0 {
		var out []string
		seen := make(map[string]struct{})
		h.each(ms, mint, maxt, func(s *headSeries, _ []int64, _ []float64) {
			v := rawLabelValue(s.raw, name)
			if _, ok := seen[string(v)]; ok || len(v) == 0 {
				return
			}
			sv := string(v)
			seen[sv] = struct{}{}
			out = append(out, sv)
		})
		return out
	}
	flushed := h.flushed.Load()
	var out []string
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		for metric, list := range sh.byName {
			if slices.ContainsFunc(list, func(s *headSeries) bool { return s.hasSample(flushed, mint, maxt) }) {
				out = append(out, metric)
			}
		}
		sh.mu.RUnlock()
	}
	return out
}

// hasSample says whether s has a sample in [mint, maxt] not yet flushed.
func (s *headSeries) hasSample(flushed uint64, mint, maxt int64) bool {
	ts, _ := s.visible(flushed)
	return slices.ContainsFunc(ts, func(t int64) bool { return t >= mint && t <= maxt })
}

// mergeHead adds the head's series to set (from VictoriaMetrics, each sorted
// and de-duplicated): samples of a series in both are merged and
// de-duplicated, the others appended. The result is not sorted by labels.
func mergeHead(set, fromHead []*series, labelsOnly bool) []*series {
	if len(fromHead) == 0 {
		return set
	}
	byKey := make(map[string]*series, len(set))
	var buf []byte
	for _, s := range set {
		buf = s.lset.Bytes(buf)
		byKey[string(buf)] = s
	}
	for _, hs := range fromHead {
		buf = hs.lset.Bytes(buf)
		s := byKey[string(buf)]
		if s == nil {
			set = append(set, hs)
			continue
		}
		if labelsOnly {
			continue
		}
		s.ts = append(s.ts, hs.ts...)
		s.vs = append(s.vs, hs.vs...)
		s.sortAndDedup()
	}
	return set
}
