package storage

import (
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// TestVMDebugFlushKeepsNoRowBuffer checks that vmAddRows and vmDebugFlush
// make every row searchable as AddRows and DebugFlush do, that a batch
// into an existing partition gets a buffer of its size, and that no
// buffer stays after the flush, where lib/storage alone allocates and
// keeps 8 MiB (the control, so that the test fails if lib/storage stops
// doing so, and vmrawrows.go is no longer needed, or if vmrawrows.go
// stops working).
func TestVMDebugFlushKeepsNoRowBuffer(t *testing.T) {
	require.NoError(t, vmRawRowsCheck())
	require.NoError(t, vmInit(0, 0, nil)) // one shard per partition, as Open sets it
	raw, err := marshalRawName(nil, labels.FromStrings("__name__", "m"))
	require.NoError(t, err)
	const rows = 1000
	now := time.Now().UnixMilli()

	type got struct {
		during, after  uint64 // shard buffer bytes while the second batch waits, and after its flush
		total, pending uint64 // rows in the store, and not yet in a part
	}
	// run adds two batches of rows to a fresh store, each followed by
	// flush; the first creates the partition.
	run := func(add func(*vmstorage.Storage, []vmstorage.MetricRow, uint8), flush func(*vmstorage.Storage)) (g got) {
		vm, err := openVM(filepath.Join(t.TempDir(), "vm"), 24*time.Hour, false)
		require.NoError(t, err)
		defer vm.MustClose()
		for batch := range 2 {
			mrs := make([]vmstorage.MetricRow, rows)
			for i := range mrs {
				mrs[i] = vmstorage.MetricRow{MetricNameRaw: raw, Timestamp: now + int64(batch*rows+i), Value: float64(i)}
			}
			add(vm, mrs, precisionBits)
			g.during = shardBuffers(vm)
			flush(vm)
		}
		g.after = shardBuffers(vm)
		var m vmstorage.Metrics
		vm.UpdateMetrics(&m)
		g.total, g.pending = m.TableMetrics.TotalRowsCount(), m.TableMetrics.PendingRows
		return g
	}
	const buffer = 8 << 20 // lib/storage's maxRawRowsPerShard rows
	vm := run((*vmstorage.Storage).AddRows, (*vmstorage.Storage).DebugFlush)
	ours := run(vmAddRows, vmDebugFlush)
	t.Logf("lib/storage: %+v; vmAddRows and vmDebugFlush: %+v", vm, ours)
	require.InDelta(t, buffer, vm.during, buffer/100, "lib/storage did not allocate an 8 MiB row buffer: re-read lib/storage/raw_row.go, vmrawrows.go may be moot")
	require.InDelta(t, buffer, vm.after, buffer/100, "lib/storage kept no 8 MiB row buffer: re-read lib/storage/raw_row.go, vmrawrows.go may be moot")
	require.Less(t, ours.during, uint64(buffer/100), "vmAddRows did not size the buffer to the batch")
	require.Zero(t, ours.after, "vmDebugFlush left a row buffer")
	require.Equal(t, got{during: vm.during, after: vm.after, total: 2 * rows}, vm)
	require.Equal(t, uint64(2*rows), ours.total, "rows lost")
	require.Zero(t, ours.pending, "rows still pending after vmDebugFlush")
}

// shardBuffers is the capacity in bytes of vm's shards' row buffers, read
// the way vmReleaseRawRows reaches them.
func shardBuffers(vm *vmstorage.Storage) uint64 {
	var n uint64
	vmPartitions(vm, func(pt reflect.Value) {
		shards := vmField(vmField(pt, "rawRows"), "shards")
		for j := range shards.Len() {
			shard := shards.Index(j)
			mu := vmMutex(vmField(shard, "mu"))
			mu.Lock()
			rows := vmField(shard, "rows")
			n += uint64(rows.Cap()) * uint64(rows.Type().Elem().Size())
			mu.Unlock()
		}
	})
	return n
}

// TestVMAddRowsConcurrently: batches added and flushed from several
// goroutines at once, beside lib/storage's own flusher, all end up in the
// store (run with -race to check the locking).
func TestVMAddRowsConcurrently(t *testing.T) {
	require.NoError(t, vmInit(0, 0, nil))
	vm, err := openVM(filepath.Join(t.TempDir(), "vm"), 24*time.Hour, false)
	require.NoError(t, err)
	defer vm.MustClose()
	const writers, batches, rows = 4, 50, 300
	now := time.Now().UnixMilli()
	var wg sync.WaitGroup
	for w := range writers {
		raw, err := marshalRawName(nil, labels.FromStrings("__name__", "m", "w", strconv.Itoa(w)))
		require.NoError(t, err)
		wg.Go(func() {
			for b := range batches {
				mrs := make([]vmstorage.MetricRow, rows)
				for i := range mrs {
					mrs[i] = vmstorage.MetricRow{MetricNameRaw: raw, Timestamp: now + int64(b*rows+i), Value: 1}
				}
				vmAddRows(vm, mrs, precisionBits)
				if b%3 == 0 {
					vmDebugFlush(vm)
				}
			}
		})
	}
	wg.Wait()
	vmDebugFlush(vm)
	var m vmstorage.Metrics
	vm.UpdateMetrics(&m)
	require.Equal(t, uint64(writers*batches*rows), m.TableMetrics.TotalRowsCount())
	require.Zero(t, m.TableMetrics.PendingRows)
	require.Zero(t, shardBuffers(vm))
}
