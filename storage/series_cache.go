package storage

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// errLabelTooLong is returned for a label name or value VictoriaMetrics
// cannot encode (its raw names use 16-bit lengths).
var errLabelTooLong = fmt.Errorf("%w: label name or value longer than 65535 bytes", ErrInvalidSeries)

// errNoLabels is returned for a sample without any non-empty label.
var errNoLabels = fmt.Errorf("%w: series has no labels", ErrInvalidSeries)

// collisionRefBit marks SeriesRefs handed out for a label set whose hash
// collides with another cached label set: such refs come from a counter,
// not from the hash, so they never alias.
const collisionRefBit = 1 << 63

// seriesCache maps SeriesRefs to the marshalled VictoriaMetrics raw metric
// name of their label set, so the append hot path does not re-marshal labels
// that the scrape loop already identified by ref, and to the head's and the
// WAL's places for the series (seriesEntry): one map lookup per sample
// where there were three (issue 17's ingest profile: each a cache miss at
// 100,000 series).
//
// A ref is the labels' hash (top bit cleared), so it is stable across
// appenders and restarts. The cache is bounded: it keeps two generations per
// shard and drops the older one when the newer is full, like VM's
// workingsetcache. An evicted ref is simply resolved again from the labels
// the caller passes with it.
type seriesCache struct {
	shards      [seriesCacheShards]seriesCacheShard
	maxPerShard int

	// collisions holds label sets whose hash is taken by another one,
	// keyed by raw name. Practically always empty.
	collisionsMu  sync.Mutex
	collisions    map[string]uint64
	nextCollision atomic.Uint64

	// newNameBytes sums the raw names added to the cache since the last
	// takeNewNameBytes: series likely new to the index, which the
	// free-disk watermark books (diskspace.go).
	newNameBytes atomic.Uint64
}

// takeNewNameBytes returns and resets newNameBytes.
func (c *seriesCache) takeNewNameBytes() uint64 { return c.newNameBytes.Swap(0) }

const seriesCacheShards = 16

type seriesCacheShard struct {
	mu         sync.RWMutex
	curr, prev map[uint64]*seriesEntry
	_          [40]byte // keep shards on separate cache lines
}

// seriesEntry is what the append path knows of one ref. An entry dropped
// with its cache generation is made again from the labels; the head and
// the WAL then find their place for the series as if it were new to them
// (the head by its own map, the WAL names the series again).
type seriesEntry struct {
	raw []byte // VictoriaMetrics raw metric name; never changes
	// head is the series in the head, nil until the head has it; guarded
	// by the mu of the head's shard of the ref (head.add).
	head *headSeries
	// walID is the ref the WAL's records name the series by in the WAL's
	// generation walGen; guarded by the WAL's mu (wal.log).
	walID  chunks.HeadSeriesRef
	walGen uint64
}

func newSeriesCache(maxEntries int) *seriesCache {
	c := &seriesCache{maxPerShard: max(maxEntries/seriesCacheShards/2, 1024)}
	for i := range c.shards {
		c.shards[i].curr = make(map[uint64]*seriesEntry)
	}
	return c
}

// get returns the entry cached for ref.
func (c *seriesCache) get(ref uint64) (*seriesEntry, bool) {
	sh := &c.shards[ref%seriesCacheShards]
	sh.mu.RLock()
	e, ok := sh.curr[ref]
	if !ok && sh.prev != nil {
		e, ok = sh.prev[ref]
		if ok {
			sh.mu.RUnlock()
			sh.mu.Lock()
			sh.put(ref, e, c.maxPerShard)
			sh.mu.Unlock()
			return e, true
		}
	}
	sh.mu.RUnlock()
	return e, ok
}

func (sh *seriesCacheShard) put(ref uint64, e *seriesEntry, maxEntries int) {
	if len(sh.curr) >= maxEntries {
		sh.prev = sh.curr
		sh.curr = make(map[uint64]*seriesEntry, maxEntries/4)
	}
	sh.curr[ref] = e
}

// unbook takes n bytes off newNameBytes (a series added to the cache and
// then refused, storage.max_series: nothing reaches the index), never
// below zero.
func (c *seriesCache) unbook(n int) {
	for {
		cur := c.newNameBytes.Load()
		if c.newNameBytes.CompareAndSwap(cur, cur-min(cur, uint64(n))) {
			return
		}
	}
}

// resolve returns the ref and the cached raw name for ls. scratch is a
// buffer the caller owns; it is returned, grown, for reuse.
func (c *seriesCache) resolve(ls labels.Labels, scratch []byte) (ref uint64, raw, scratchOut []byte, err error) {
	ref, e, scratchOut, _, err := c.resolveNew(ls, scratch)
	if err != nil {
		return 0, nil, scratchOut, err
	}
	return ref, e.raw, scratchOut, nil
}

// resolveNew is resolve that returns the entry and also says whether ls
// was added to the cache (and its bytes to newNameBytes).
func (c *seriesCache) resolveNew(ls labels.Labels, scratch []byte) (ref uint64, e *seriesEntry, scratchOut []byte, added bool, err error) {
	scratch, err = marshalRawName(scratch[:0], ls)
	if err != nil {
		return 0, nil, scratch, false, err
	}
	if err := checkIndexedSize(ls); err != nil {
		return 0, nil, scratch, false, err
	}
	ref = ls.Hash() &^ collisionRefBit
	if ref == 0 {
		ref = 1
	}
	if cached, ok := c.get(ref); ok {
		if bytes.Equal(cached.raw, scratch) {
			return ref, cached, scratch, false, nil
		}
		ref, e = c.resolveCollision(scratch)
		return ref, e, scratch, false, nil
	}
	e = &seriesEntry{raw: bytes.Clone(scratch)}
	sh := &c.shards[ref%seriesCacheShards]
	sh.mu.Lock()
	if cached, ok := sh.curr[ref]; ok {
		sh.mu.Unlock()
		if !bytes.Equal(cached.raw, e.raw) {
			ref, e = c.resolveCollision(e.raw)
			return ref, e, scratch, false, nil
		}
		// Another appender added it meanwhile: one entry per ref, so
		// the head and the WAL find their places by it.
		return ref, cached, scratch, false, nil
	}
	sh.put(ref, e, c.maxPerShard)
	sh.mu.Unlock()
	c.newNameBytes.Add(uint64(len(e.raw)))
	return ref, e, scratch, true, nil
}

func (c *seriesCache) resolveCollision(name []byte) (uint64, *seriesEntry) {
	c.collisionsMu.Lock()
	defer c.collisionsMu.Unlock()
	if c.collisions == nil {
		c.collisions = make(map[string]uint64)
	}
	ref, ok := c.collisions[string(name)]
	if !ok {
		ref = collisionRefBit | c.nextCollision.Add(1)
		c.collisions[string(name)] = ref
	}
	if cached, ok := c.get(ref); ok {
		return ref, cached
	}
	e := &seriesEntry{raw: bytes.Clone(name)}
	sh := &c.shards[ref%seriesCacheShards]
	sh.mu.Lock()
	sh.put(ref, e, c.maxPerShard)
	sh.mu.Unlock()
	return ref, e
}

// lookup is the hot path of Append: a ref the caller got from an earlier
// Append is trusted (as Prometheus' head trusts it); anything else is
// resolved from the labels.
// added says whether ls was new to the cache (its bytes booked, see
// unbook).
func (c *seriesCache) lookup(ref promstorage.SeriesRef, ls labels.Labels, scratch []byte) (_ promstorage.SeriesRef, e *seriesEntry, scratchOut []byte, added bool, err error) {
	if ref != 0 {
		if e, ok := c.get(uint64(ref)); ok {
			return ref, e, scratch, false, nil
		}
	}
	r, e, scratch, added, err := c.resolveNew(ls, scratch)
	return promstorage.SeriesRef(r), e, scratch, added, err
}

// marshalRawName appends ls in VictoriaMetrics' raw metric name format
// (what lib/storage.MarshalMetricNameRaw produces from prompb labels): for
// each label with a non-empty value a 2-byte big-endian name length, the
// name ("" for __name__), a 2-byte value length and the value.
func marshalRawName(dst []byte, ls labels.Labels) ([]byte, error) {
	start := len(dst)
	var err error
	ls.Range(func(l labels.Label) {
		if l.Value != "" && err == nil {
			dst, err = appendRawLabel(dst, l.Name, l.Value)
		}
	})
	if err != nil {
		return dst[:start], err
	}
	if len(dst) == start {
		return dst, errNoLabels
	}
	return dst, nil
}

// marshalRawNameWith is marshalRawName of ls with the label name=value
// set, as labels.Builder's Set would (value not empty): the same bytes
// without building the label set (the rollups name four tier series per
// raw series this way).
func marshalRawNameWith(dst []byte, ls labels.Labels, name, value string) ([]byte, error) {
	if dst == nil { // one allocation of the size needed (at most)
		n := 4 + len(name) + len(value)
		ls.Range(func(l labels.Label) { n += 4 + len(l.Name) + len(l.Value) })
		dst = make([]byte, 0, n)
	}
	start := len(dst)
	var err error
	pending := true
	ls.Range(func(l labels.Label) {
		if err != nil {
			return
		}
		if pending && l.Name >= name {
			dst, err = appendRawLabel(dst, name, value)
			pending = false
			if l.Name == name {
				return // replaced
			}
		}
		if l.Value != "" && err == nil {
			dst, err = appendRawLabel(dst, l.Name, l.Value)
		}
	})
	if pending && err == nil {
		dst, err = appendRawLabel(dst, name, value)
	}
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// appendRawLabel appends one label of a raw name.
func appendRawLabel(dst []byte, name, value string) ([]byte, error) {
	orig := name
	if name == labels.MetricName {
		name = ""
	}
	if len(name) > math.MaxUint16 || len(value) > math.MaxUint16 {
		return dst, fmt.Errorf("%w: label %.64s", errLabelTooLong, orig)
	}
	dst = append(dst, byte(len(name)>>8), byte(len(name)))
	dst = append(dst, name...)
	dst = append(dst, byte(len(value)>>8), byte(len(value)))
	return append(dst, value...), nil
}

// rawLabelLens returns the name's and the value's length of the first
// label of a raw name; ok is false when raw is too short for them.
func rawLabelLens(raw []byte) (kl, vl int, ok bool) {
	if len(raw) < 4 {
		return 0, 0, false
	}
	kl = int(raw[0])<<8 | int(raw[1])
	if len(raw) < 2+kl+2 {
		return 0, 0, false
	}
	vl = int(raw[2+kl])<<8 | int(raw[3+kl])
	if len(raw) < 4+kl+vl {
		return 0, 0, false
	}
	return kl, vl, true
}
