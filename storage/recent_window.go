package storage

import (
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/decimal"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
)

// The recent window keeps the last recentSpan of samples of the raw series
// that rules read, in memory, so that a rule evaluation does not search
// VictoriaMetrics. A search there costs about 10 µs per series whatever the
// range (its index search, the per-part block search and the metric name
// lookup: 75% of a rule round in BenchmarkRuleRound), which made 200 rules
// over 100,000 series 1.9 times slower than Prometheus reading its head.
//
// What it holds: every sample committed to the raw tier whose metric name
// is "hot", i.e. was selected by name (`x{...}`, `__name__="x"`) through
// the raw querier. A name turns hot on its first such Select and stays hot
// until Close. When it turns hot the window copies the name's last
// recentSpan (and recentMargin) from the store, the head and
// VictoriaMetrics (heat, fill), so that rules are answered from memory
// from their first evaluation on, not recentSpan after a restart (17
// minutes in which rules read VictoriaMetrics: 24% of the small box's CPU
// profile in a 4-minute run, issue 17). The window answers a Select only
// when it holds every sample of the range: its start must be within
// recentSpan of now and, if the fill failed, at least recentMargin after
// the name turned hot (Commits under way then may not have been seen).
// Anything else (other selectors, longer ranges) reads VictoriaMetrics as
// before.
//
// Values are kept as appended. VictoriaMetrics stores about 15 significant
// digits, so a value read from the window can differ from the same value
// read from disk in the last digits.
//
// Cost: about 1.1 KB per hot series at a 15 s scrape interval (up to 68
// samples of 16 bytes, growth slack, labels and map entries; 104 MiB for
// the 100,182 series BenchmarkRuleRound's rules read), and per Commit a map
// lookup per row. At most maxRecentSeries(MemoryBudget) series (1/8 of the
// memory budget, counted at a conservative recentBytesPerSeries); a name
// whose series would exceed that is refused (read from disk), with a
// warning. DB.RecentWindowStats reports the figures.

const (
	// recentSpan is how far back the window keeps samples: the longest
	// range the rule packs read (avg_over_time(up[15m])) plus a minute for
	// evaluation delay and query_offset.
	recentSpan = 16 * time.Minute
	// recentMargin is kept beyond recentSpan before samples are dropped
	// (the clock moves between a Select's check and its read), and waited
	// after a name turns hot before the window serves it.
	recentMargin = time.Minute
	// recentSweepEvery is how often series without samples in the window
	// are dropped.
	recentSweepEvery = recentSpan / 4
	// maxRecentSelectors bounds the cached selector results; when full the
	// cache starts over. Rules reuse the same few hundred selectors, and a
	// new series is matched against every cached selector of its name.
	maxRecentSelectors = 4096
	// recentBytesPerSeries is the estimate maxRecentSeries divides by:
	// 1.1 KB measured, plus room for longer labels or shorter intervals.
	recentBytesPerSeries = 1700
)

// maxRecentSeries is how many series the window may hold: 1/8 of the memory
// budget at recentBytesPerSeries each.
func maxRecentSeries(budget int64) int {
	if budget <= 0 {
		budget = vmMemoryBudget
	}
	return int(min(max(budget/8/recentBytesPerSeries, 10_000), 2_000_000))
}

// recentWindow is safe for concurrent use. Commit calls add after
// VictoriaMetrics accepted the rows; the raw querier calls read.
type recentWindow struct {
	now       func() time.Time
	maxSeries int
	logger    *slog.Logger

	// fill, when set, reads a name's samples in [mint, maxt] from the
	// store (the head and VictoriaMetrics) when the name turns hot, so that
	// the window holds its last recentSpan at once and serves it from then
	// on; without it a name is served recentSpan after it turned hot.
	fill func(name string, mint, maxt int64) ([]*series, error)

	// fed is set by the first add. A window nothing feeds serves nothing.
	fed       atomic.Bool
	nextSweep atomic.Int64

	// mu is held for reading by add and read, and for writing to create
	// or drop series and to turn names hot. Holding it for writing waits
	// for the adds under way, which is what makes "hot since" exact.
	mu sync.RWMutex
	// hot maps a metric name to the first timestamp (ms) from which the
	// window holds every committed sample of it; math.MaxInt64 for a
	// refused name.
	hot      map[string]int64
	series   map[string]*recentSeries // by VictoriaMetrics raw metric name
	byMetric map[string][]*recentSeries

	// selMu guards selectors: read adds entries under mu held for
	// reading; series changes update entries under mu held for writing.
	selMu      sync.Mutex
	selectors  map[string]map[string]*selectorEntry // metric name → selectorKey → entry
	nSelectors int
}

// selectorEntry is a cached selector result, kept up to date as series
// come and go: a new series is added to every entry of its name it
// matches, so a name with many selectors (one per rule) and new series now
// and then is not searched again (a full search of 90,000 series per
// selector was a second per round in BenchmarkRuleRound).
type selectorEntry struct {
	ms     []*labels.Matcher
	series []*recentSeries // sorted by labels unless unsorted
	// unsorted is set while create appends to series.
	unsorted bool
}

func newRecentWindow(now func() time.Time, maxSeries int, logger *slog.Logger) *recentWindow {
	return &recentWindow{
		now:       now,
		maxSeries: maxSeries,
		logger:    logger,
		hot:       make(map[string]int64),
		series:    make(map[string]*recentSeries),
		byMetric:  make(map[string][]*recentSeries),
		selectors: make(map[string]map[string]*selectorEntry),
	}
}

// recentSeries holds one series' samples in the window, sorted by
// timestamp, one per timestamp.
type recentSeries struct {
	lset labels.Labels
	raw  string // the key in recentWindow.series
	name string // its metric name

	mu sync.Mutex
	ts []int64
	vs []float64
}

// add keeps the rows of hot names. rows are what VictoriaMetrics accepted
// in one Commit; their raw names are not kept.
func (w *recentWindow) add(rows []vmstorage.MetricRow) {
	if len(rows) == 0 {
		return
	}
	w.fed.Store(true)
	now := w.now().UnixMilli()
	horizon := now - (recentSpan + recentMargin).Milliseconds()
	var fresh []int
	w.mu.RLock()
	if len(w.hot) == 0 {
		w.mu.RUnlock()
		return
	}
	for i := range rows {
		r := &rows[i]
		if r.Timestamp < horizon {
			continue
		}
		if s := w.series[string(r.MetricNameRaw)]; s != nil {
			s.add(r.Timestamp, r.Value, horizon)
			continue
		}
		name, ok := rawMetricGroup(r.MetricNameRaw)
		if !ok {
			continue
		}
		if since, ok := w.hot[string(name)]; ok && since != math.MaxInt64 {
			fresh = append(fresh, i)
		}
	}
	w.mu.RUnlock()
	if len(fresh) > 0 {
		w.create(rows, fresh, horizon)
	}
	if now >= w.nextSweep.Load() {
		w.sweep(now)
	}
}

// create adds the series of rows[idx] (of hot names) and their samples.
func (w *recentWindow) create(rows []vmstorage.MetricRow, idx []int, horizon int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var mn vmstorage.MetricName
	var b labels.ScratchBuilder
	var touched []*selectorEntry
	defer func() {
		for _, e := range touched {
			sortRecent(e.series)
			e.unsorted = false
		}
	}()
	for _, i := range idx {
		r := &rows[i]
		s := w.series[string(r.MetricNameRaw)]
		if s == nil {
			name, _ := rawMetricGroup(r.MetricNameRaw)
			if w.hot[string(name)] == math.MaxInt64 {
				continue // refused meanwhile
			}
			if err := mn.UnmarshalRaw(r.MetricNameRaw); err != nil {
				continue // cannot happen: Commit marshalled it
			}
			if s, touched = w.newSeries(metricNameToLabels(&b, &mn), string(r.MetricNameRaw), string(name), touched); s == nil {
				continue // refused
			}
		}
		s.add(r.Timestamp, r.Value, horizon)
	}
}

// newSeries adds a series of name to the window and to the cached
// selector results it matches (returned in touched, unsorted), or refuses
// name and returns nil when the window is full. w.mu is held for writing.
func (w *recentWindow) newSeries(lset labels.Labels, raw, name string, touched []*selectorEntry) (*recentSeries, []*selectorEntry) {
	if len(w.series) >= w.maxSeries {
		w.refuse(name)
		return nil, touched
	}
	s := &recentSeries{lset: lset, raw: raw, name: name}
	w.series[raw] = s
	w.byMetric[name] = append(w.byMetric[name], s)
	return s, w.addToSelectors(s, touched)
}

// refuse stops keeping name: the window holds more series than it may.
// w.mu is held for writing.
func (w *recentWindow) refuse(name string) {
	w.hot[name] = math.MaxInt64
	for _, s := range w.byMetric[name] {
		delete(w.series, s.raw)
	}
	delete(w.byMetric, name)
	w.forgetSelectors(name)
	w.logger.Warn("the in-memory window of recent samples is full; rules on this metric read from disk",
		"metric", name, "max_series", w.maxSeries)
}

// sweep drops series without samples in the window. Dropping is what
// bounds the window to the series that still receive samples.
func (w *recentWindow) sweep(now int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now < w.nextSweep.Load() {
		return
	}
	w.nextSweep.Store(now + recentSweepEvery.Milliseconds())
	horizon := now - (recentSpan + recentMargin).Milliseconds()
	var dirty []string
	for raw, s := range w.series {
		s.mu.Lock()
		s.trim(horizon)
		empty := len(s.ts) == 0
		s.mu.Unlock()
		if empty {
			delete(w.series, raw)
			if !slices.Contains(dirty, s.name) {
				dirty = append(dirty, s.name)
			}
		}
	}
	dropped := func(s *recentSeries) bool { return w.series[s.raw] != s }
	w.selMu.Lock()
	defer w.selMu.Unlock()
	for _, name := range dirty {
		w.byMetric[name] = slices.DeleteFunc(w.byMetric[name], dropped)
		for _, e := range w.selectors[name] {
			e.series = slices.DeleteFunc(e.series, dropped)
		}
	}
}

// reset drops every sample (Delete removed series from disk): names stay
// hot but are read from disk until the window holds their recentSpan again.
func (w *recentWindow) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	start := w.now().Add(recentMargin).UnixMilli()
	for name, since := range w.hot {
		if since != math.MaxInt64 {
			w.hot[name] = start
		}
	}
	clear(w.series)
	clear(w.byMetric)
	w.selMu.Lock()
	clear(w.selectors)
	w.nSelectors = 0
	w.selMu.Unlock()
}

// forgetSelectors drops cached selector results of name; w.mu is held for
// writing.
func (w *recentWindow) forgetSelectors(name string) {
	w.selMu.Lock()
	w.nSelectors -= len(w.selectors[name])
	delete(w.selectors, name)
	w.selMu.Unlock()
}

// addToSelectors appends s to the cached selector results it matches and
// returns touched with the entries it changed (not sorted yet); w.mu is
// held for writing.
func (w *recentWindow) addToSelectors(s *recentSeries, touched []*selectorEntry) []*selectorEntry {
	w.selMu.Lock()
	defer w.selMu.Unlock()
	for _, e := range w.selectors[s.name] {
		if !matchesAll(e.ms, s.lset) {
			continue
		}
		e.series = append(e.series, s)
		if !e.unsorted {
			e.unsorted = true
			touched = append(touched, e)
		}
	}
	return touched
}

func sortRecent(set []*recentSeries) {
	slices.SortFunc(set, func(a, b *recentSeries) int { return labels.Compare(a.lset, b.lset) })
}

// read returns the series matching ms with their samples in [mint, maxt],
// sorted by labels, or ok false when the window does not hold all of them
// (the caller reads VictoriaMetrics). The series returned are the caller's.
func (w *recentWindow) read(ms []*labels.Matcher, mint, maxt int64, maxSeries, maxSamples int) (set []*series, ok bool, err error) {
	name, ok := selectedName(ms)
	if !ok {
		return nil, false, nil
	}
	now := w.now().UnixMilli()
	w.mu.RLock()
	since, hot := w.hot[name]
	if !hot {
		w.mu.RUnlock()
		w.heat(name)
		w.mu.RLock()
		since = w.hot[name]
	}
	defer w.mu.RUnlock()
	if !w.fed.Load() || since == math.MaxInt64 || mint < max(since, now-recentSpan.Milliseconds()) {
		return nil, false, nil
	}
	matched := w.match(name, ms)
	if len(matched) > maxSeries {
		return nil, true, errTooManySeries(maxSeries)
	}
	// One buffer for every series' samples; each series gets a capped
	// slice of it, so appending to one cannot overwrite the next.
	offs := make([]int, len(matched)+1)
	var ts []int64
	var vs []float64
	for i, s := range matched {
		s.mu.Lock()
		lo := sort.Search(len(s.ts), func(k int) bool { return s.ts[k] >= mint })
		hi := lo + sort.Search(len(s.ts)-lo, func(k int) bool { return s.ts[lo+k] > maxt })
		if ts == nil && hi > lo {
			n := len(matched) * (hi - lo)
			ts, vs = make([]int64, 0, n), make([]float64, 0, n)
		}
		ts = append(ts, s.ts[lo:hi]...)
		vs = append(vs, s.vs[lo:hi]...)
		s.mu.Unlock()
		offs[i+1] = len(ts)
		if len(ts) > maxSamples {
			return nil, true, errTooManySamples(maxSamples)
		}
	}
	slab := make([]series, 0, len(matched))
	set = make([]*series, 0, len(matched))
	for i, s := range matched {
		a, b := offs[i], offs[i+1]
		if a == b {
			continue
		}
		slab = append(slab, series{lset: s.lset, ts: ts[a:b:b], vs: vs[a:b:b]})
		set = append(set, &slab[len(slab)-1])
	}
	return set, true, nil
}

// heat turns name hot: the window keeps its samples from now on and serves
// it from recentMargin on; with fill, it copies the name's last recentSpan
// (and margin) from the store and serves it at once.
//
// Nothing is missed between the two: a Commit adds its rows to the head
// before it hands them to the window (appender.go), so the rows of a
// Commit whose add ran before the name turned hot are in the store when
// fill reads it, and those of the rest reach the window. A row seen by
// both is kept once (recentSeries.add).
func (w *recentWindow) heat(name string) {
	w.mu.Lock()
	if _, ok := w.hot[name]; ok {
		w.mu.Unlock()
		return
	}
	now := w.now()
	since := now.Add(recentMargin).UnixMilli()
	w.hot[name] = since
	fill := w.fill
	w.mu.Unlock()
	if fill == nil {
		return
	}
	mint := now.Add(-(recentSpan + recentMargin)).UnixMilli()
	set, err := fill(name, mint, math.MaxInt64)
	if err != nil {
		w.logger.Debug("cannot fill the in-memory window of recent samples; rules on this metric read from disk for now",
			"metric", name, "err", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hot[name] != since {
		return // refused or reset (Delete) meanwhile: what fill read may be gone
	}
	if w.fillLocked(name, set, w.now().Add(-(recentSpan + recentMargin)).UnixMilli()) {
		w.hot[name] = mint
	}
}

// fillLocked adds the series set of name read from the store, and reports
// false if the name was refused for the window's size. w.mu is held for
// writing.
func (w *recentWindow) fillLocked(name string, set []*series, horizon int64) bool {
	var touched []*selectorEntry
	defer func() {
		for _, e := range touched {
			sortRecent(e.series)
			e.unsorted = false
		}
	}()
	for _, from := range set {
		raw, err := marshalRawName(nil, from.lset)
		if err != nil {
			continue // cannot happen: Commit marshalled the same labels
		}
		s := w.series[string(raw)]
		if s == nil {
			if s, touched = w.newSeries(from.lset, string(raw), name, touched); s == nil {
				return false
			}
		}
		s.addOlder(from.ts, from.vs, horizon)
	}
	return true
}

// match returns the series of name matching ms, sorted by labels, from the
// selector cache or by scanning the name's series. w.mu is held for reading.
func (w *recentWindow) match(name string, ms []*labels.Matcher) []*recentSeries {
	key := selectorKey(ms)
	w.selMu.Lock()
	e, ok := w.selectors[name][key]
	w.selMu.Unlock()
	if ok {
		return e.series
	}
	// Every series in byMetric[name] has the name: test the other matchers.
	rest := make([]*labels.Matcher, 0, len(ms))
	for _, m := range ms {
		if m.Name != labels.MetricName || m.Type != labels.MatchEqual {
			rest = append(rest, m)
		}
	}
	var got []*recentSeries
	for _, s := range w.byMetric[name] {
		if matchesAll(rest, s.lset) {
			got = append(got, s)
		}
	}
	sortRecent(got)
	w.selMu.Lock()
	defer w.selMu.Unlock()
	if e, ok := w.selectors[name][key]; ok {
		return e.series // another read was first
	}
	if w.nSelectors >= maxRecentSelectors {
		clear(w.selectors)
		w.nSelectors = 0
	}
	byKey := w.selectors[name]
	if byKey == nil {
		byKey = make(map[string]*selectorEntry)
		w.selectors[name] = byKey
	}
	byKey[key] = &selectorEntry{ms: slices.Clone(ms), series: got}
	w.nSelectors++
	return got
}

func matchesAll(ms []*labels.Matcher, ls labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// selectedName returns the metric name an equality matcher selects.
func selectedName(ms []*labels.Matcher) (string, bool) {
	for _, m := range ms {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual && m.Value != "" {
			return m.Value, true
		}
	}
	return "", false
}

func selectorKey(ms []*labels.Matcher) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.Name)
		b.WriteByte(byte(m.Type))
		b.WriteString(m.Value)
		b.WriteByte(0xff)
	}
	return b.String()
}

// rawMetricGroup returns the metric name in a raw metric name (the format
// of marshalRawName: 2-byte lengths, the name's key is empty).
func rawMetricGroup(raw []byte) ([]byte, bool) {
	for len(raw) >= 4 {
		kl := int(raw[0])<<8 | int(raw[1])
		if len(raw) < 2+kl+2 {
			return nil, false
		}
		vl := int(raw[2+kl])<<8 | int(raw[3+kl])
		if len(raw) < 4+kl+vl {
			return nil, false
		}
		if kl == 0 {
			return raw[4 : 4+vl], true
		}
		raw = raw[4+kl+vl:]
	}
	return nil, false
}

// add inserts one sample and drops samples older than horizon. A second
// sample at a timestamp follows the rule of sortAndDedup (VictoriaMetrics'
// dedup): the larger value wins, a staleness marker only over another.
func (s *recentSeries) add(t int64, v float64, horizon int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.ts)
	if n == 0 || t > s.ts[n-1] {
		s.grow()
		s.ts = append(s.ts, t)
		s.vs = append(s.vs, v)
	} else if i := sort.Search(n, func(k int) bool { return s.ts[k] >= t }); s.ts[i] == t {
		switch a := s.vs[i]; {
		case decimal.IsStaleNaN(v):
		case decimal.IsStaleNaN(a) || v > a:
			s.vs[i] = v
		}
	} else {
		s.grow()
		s.ts = slices.Insert(s.ts, i, t)
		s.vs = slices.Insert(s.vs, i, v)
	}
	s.trim(horizon)
}

// addOlder inserts samples sorted by timestamp, one per timestamp (a read
// from the store), and drops those older than horizon. Samples older than
// every one held (a fill: the window held only what came after) are put
// in front at once; others one by one.
func (s *recentSeries) addOlder(ts []int64, vs []float64, horizon int64) {
	cut := sort.Search(len(ts), func(k int) bool { return ts[k] >= horizon })
	ts, vs = ts[cut:], vs[cut:]
	if len(ts) == 0 {
		return
	}
	s.mu.Lock()
	if len(s.ts) == 0 || ts[len(ts)-1] < s.ts[0] {
		n := len(ts) + len(s.ts)
		s.ts = append(append(make([]int64, 0, n+n/4+8), ts...), s.ts...)
		s.vs = append(append(make([]float64, 0, n+n/4+8), vs...), s.vs...)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	for i := range ts {
		s.add(ts[i], vs[i], horizon)
	}
}

// grow makes room for one more sample with less slack than append's
// doubling: the window is most of the memory the series costs.
func (s *recentSeries) grow() {
	if len(s.ts) < cap(s.ts) {
		return
	}
	c := len(s.ts) + len(s.ts)/4 + 8
	s.ts = append(make([]int64, 0, c), s.ts...)
	s.vs = append(make([]float64, 0, c), s.vs...)
}

func (s *recentSeries) trim(horizon int64) {
	if len(s.ts) == 0 || s.ts[0] >= horizon {
		return
	}
	cut := sort.Search(len(s.ts), func(k int) bool { return s.ts[k] >= horizon })
	s.ts, s.vs = s.ts[cut:], s.vs[cut:]
}

// RecentWindowStats returns how many series the in-memory window of recent
// samples holds and about how many bytes they take (samples, labels and
// the window's maps; see recent_window.go).
func (db *DB) RecentWindowStats() (series int, bytes int64) {
	w := db.recent
	w.mu.RLock()
	defer w.mu.RUnlock()
	for raw, s := range w.series {
		s.mu.Lock()
		bytes += int64(cap(s.ts))*16 + int64(len(s.lset.Bytes(nil))+len(raw)+len(s.name)) + recentSeriesOverhead
		s.mu.Unlock()
	}
	return len(w.series), bytes
}

// recentSeriesOverhead is a series' fixed cost besides its samples and
// strings: the struct, its map entries and pointers in byMetric.
const recentSeriesOverhead = 200
