package storage

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// decodeBatchBlocks bounds the compressed blocks held before they are
// decoded: a block holds up to 8,192 rows, a few KiB compressed, so a
// batch stays within a few MiB whatever the query.
const decodeBatchBlocks = 512

var blockPool = sync.Pool{New: func() any { return new(vmstorage.Block) }}

func getBlock() *vmstorage.Block { return blockPool.Get().(*vmstorage.Block) }

func putBlock(b *vmstorage.Block) {
	b.Reset()
	blockPool.Put(b)
}

// decodeBatch holds read, not yet decoded blocks, grouped by series in
// the order they were read.
type decodeBatch struct {
	series []*series
	blocks int
}

func (d *decodeBatch) add(s *series, b *vmstorage.Block) {
	if len(s.blocks) == 0 {
		d.series = append(d.series, s)
	}
	s.blocks = append(s.blocks, b)
	d.blocks++
}

// decode appends the batch's rows in tr to their series, in parallel one
// series per task, adds the count to samples, and empties the batch.
func (d *decodeBatch) decode(ctx context.Context, tr vmstorage.TimeRange, samples *atomic.Int64) error {
	return d.decodeAt(ctx, tr, nil, samples)
}

// decodeAt is decode of the rows in sw's windows only.
func (d *decodeBatch) decodeAt(ctx context.Context, tr vmstorage.TimeRange, sw *stepWindows, samples *atomic.Int64) error {
	return d.decodeReduced(ctx, tr, sw, nil, samples)
}

// decodeReduced is decodeAt handing each series, once decoded, sorted
// and de-duplicated, to reduce (see readSeriesReduced).
func (d *decodeBatch) decodeReduced(ctx context.Context, tr vmstorage.TimeRange, sw *stepWindows, reduce reduceFunc, samples *atomic.Int64) error {
	defer d.release()
	return parallel(ctx, len(d.series), func(i int) error {
		n, err := d.series[i].decodeBlocks(tr, sw, reduce)
		samples.Add(int64(n))
		return err
	})
}

// release returns blocks not decoded (on an early return) to the pool.
func (d *decodeBatch) release() {
	for _, s := range d.series {
		for _, b := range s.blocks {
			putBlock(b)
		}
		s.blocks = s.blocks[:0]
	}
	d.series, d.blocks = d.series[:0], 0
}

// decodeBlocks appends the rows in tr (and sw) of the series' pending
// blocks and returns how many it added.
func (s *series) decodeBlocks(tr vmstorage.TimeRange, sw *stepWindows, reduce reduceFunc) (int, error) {
	// Rows go to a pooled scratch first and then to the series in one
	// exact-size copy: appending block by block straight into the series
	// reallocated it several times (half the bytes of a large read).
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	var err error
	sc.ts, sc.vs, err = s.appendRows(sc.ts[:0], sc.vs[:0], tr, sw)
	if err != nil {
		return 0, err
	}
	if reduce != nil && len(s.ts) == 0 {
		// All of the series' blocks are in this batch (readSeriesReduced):
		// what reduce keeps is copied, not every row.
		n := len(sc.ts)
		rows := &series{ts: sc.ts, vs: sc.vs, name: s.name}
		rows.sortAndDedup()
		sc.ts, sc.vs = rows.ts, rows.vs
		if r := reduce(rows); r != nil {
			s.ts, s.vs, s.reduced = slices.Clone(r.ts), slices.Clone(r.vs), true
			return n, nil
		}
	}
	s.ts = append(s.ts, sc.ts...)
	s.vs = append(s.vs, sc.vs...)
	return len(sc.ts), nil
}

// appendRows appends the rows in tr (and sw) of the series' pending
// blocks to ts and vs. A panic in VictoriaMetrics' decoder (a corrupt
// block) is returned as an error.
func (s *series) appendRows(ts []int64, vs []float64, tr vmstorage.TimeRange, sw *stepWindows) (_ []int64, _ []float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt block: %v", r)
		}
	}()
	for _, b := range s.blocks {
		if err := b.UnmarshalData(); err != nil {
			return ts, vs, errors.Join(errors.New("corrupt block"), err)
		}
		n := len(ts)
		ts, vs = b.AppendRowsWithTimeRangeFilter(ts, vs, tr)
		kt, kv := filterSteps(sw, ts[n:], vs[n:])
		ts, vs = ts[:n+len(kt)], vs[:n+len(kv)]
	}
	return ts, vs, nil
}

// reduceFunc makes what a read keeps of one series from all its rows
// (sorted, one per timestamp), or returns nil to keep every row. What it
// returns may share rows' slices: they are copied.
type reduceFunc func(rows *series) *series

// scratch is a decode buffer reused across series.
type scratch struct {
	ts []int64
	vs []float64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// parallel runs f(0..n-1) on up to GOMAXPROCS goroutines that it owns and
// waits for, and returns the first error. It stops early when ctx ends.
func parallel(ctx context.Context, n int, f func(i int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			if err := f(i); err != nil {
				return err
			}
		}
		return ctx.Err()
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
