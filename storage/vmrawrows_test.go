package storage

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// TestVMDebugFlushKeepsNoRowBuffer checks that vmDebugFlush makes every
// row searchable as DebugFlush does and leaves no row buffer in the
// shards, where DebugFlush alone leaves an 8 MiB one (the control, so that
// the test fails if lib/storage stops keeping it, and vmrawrows.go is no
// longer needed, or if vmReleaseRawRows stops releasing it).
func TestVMDebugFlushKeepsNoRowBuffer(t *testing.T) {
	require.NoError(t, vmRawRowsCheck())
	require.NoError(t, vmInit(0, 0, nil)) // one shard per partition, as Open sets it
	raw, err := marshalRawName(nil, labels.FromStrings("__name__", "m"))
	require.NoError(t, err)
	const rows = 1000
	now := time.Now().UnixMilli()

	// held returns the bytes of row buffer a fresh store's shards keep
	// after two batches of rows, each followed by flush, and its rows.
	held := func(flush func(*vmstorage.Storage)) (buffers uint64, total, pending uint64) {
		vm, err := openVM(filepath.Join(t.TempDir(), "vm"), 24*time.Hour, false)
		require.NoError(t, err)
		defer vm.MustClose()
		for batch := range 2 {
			mrs := make([]vmstorage.MetricRow, rows)
			for i := range mrs {
				mrs[i] = vmstorage.MetricRow{MetricNameRaw: raw, Timestamp: now + int64(batch*rows+i), Value: float64(i)}
			}
			vm.AddRows(mrs, precisionBits)
			flush(vm)
		}
		var m vmstorage.Metrics
		vm.UpdateMetrics(&m)
		return shardBuffers(vm), m.TableMetrics.TotalRowsCount(), m.TableMetrics.PendingRows
	}
	const buffer = 8 << 20 // lib/storage's maxRawRowsPerShard rows
	kept, keptRows, keptPending := held((*vmstorage.Storage).DebugFlush)
	released, releasedRows, releasedPending := held(vmDebugFlush)
	t.Logf("row buffers kept after two flushes: %d bytes with DebugFlush, %d with vmDebugFlush", kept, released)
	require.InDelta(t, buffer, kept, buffer/100, "DebugFlush alone kept no 8 MiB row buffer: re-read lib/storage/raw_row.go, vmrawrows.go may be moot")
	require.Zero(t, released, "vmDebugFlush left a row buffer")
	require.Equal(t, uint64(2*rows), keptRows)
	require.Equal(t, uint64(2*rows), releasedRows, "vmDebugFlush lost rows")
	require.Zero(t, keptPending)
	require.Zero(t, releasedPending, "rows still pending after vmDebugFlush")
}

// shardBuffers is the capacity in bytes of vm's shards' row buffers, read
// the way vmReleaseRawRows reaches them.
func shardBuffers(vm *vmstorage.Storage) uint64 {
	var n uint64
	tb := vmField(reflect.ValueOf(vm).Elem(), "tb").Elem()
	ptwsLock := vmMutex(vmField(tb, "ptwsLock"))
	ptwsLock.Lock()
	defer ptwsLock.Unlock()
	ptws := vmField(tb, "ptws")
	for i := range ptws.Len() {
		shards := vmField(vmField(vmField(ptws.Index(i).Elem(), "pt").Elem(), "rawRows"), "shards")
		for j := range shards.Len() {
			shard := shards.Index(j)
			mu := vmMutex(vmField(shard, "mu"))
			mu.Lock()
			rows := vmField(shard, "rows")
			n += uint64(rows.Cap()) * uint64(rows.Type().Elem().Size())
			mu.Unlock()
		}
	}
	return n
}
