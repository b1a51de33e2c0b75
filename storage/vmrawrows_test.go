package storage

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// TestVMDebugFlushKeepsNoRowBuffer checks that vmDebugFlush makes every
// row searchable as DebugFlush does and leaves no 8 MiB row buffer behind,
// where DebugFlush alone keeps one (the control, so that the test fails if
// lib/storage stops keeping it and vmrawrows.go is no longer needed, or if
// vmReleaseRawRows stops releasing it).
func TestVMDebugFlushKeepsNoRowBuffer(t *testing.T) {
	require.NoError(t, vmRawRowsCheck())
	require.NoError(t, vmInit(0, 0, nil)) // one shard per partition, as Open sets it
	raw, err := marshalRawName(nil, labels.FromStrings("__name__", "m"))
	require.NoError(t, err)
	const rows = 1000
	now := time.Now().UnixMilli()

	// held is the live heap a fresh store keeps after two batches of rows
	// and flush after each.
	held := func(flush func(*vmstorage.Storage)) (heap, total, pending uint64) {
		vm, err := openVM(filepath.Join(t.TempDir(), "vm"), 24*time.Hour, false)
		require.NoError(t, err)
		defer vm.MustClose()
		before := liveHeap()
		for batch := range 2 {
			mrs := make([]vmstorage.MetricRow, rows)
			for i := range mrs {
				mrs[i] = vmstorage.MetricRow{MetricNameRaw: raw, Timestamp: now + int64(batch*rows+i), Value: float64(i)}
			}
			vm.AddRows(mrs, precisionBits)
			flush(vm)
		}
		after := liveHeap()
		var m vmstorage.Metrics
		vm.UpdateMetrics(&m)
		if after > before {
			heap = after - before
		}
		return heap, m.TableMetrics.TotalRowsCount(), m.TableMetrics.PendingRows
	}
	const buffer = 8 << 20 // lib/storage's maxRawRowsPerShard rows
	kept, keptRows, keptPending := held((*vmstorage.Storage).DebugFlush)
	released, releasedRows, releasedPending := held(vmDebugFlush)
	t.Logf("live heap held after two flushes: %d bytes with DebugFlush, %d with vmDebugFlush", kept, released)
	require.Greater(t, kept, uint64(buffer-buffer/8), "DebugFlush alone kept no row buffer: re-read lib/storage/raw_row.go, vmrawrows.go may be moot")
	require.Less(t, released, uint64(buffer/4), "vmDebugFlush left a row buffer")
	require.Equal(t, uint64(2*rows), keptRows)
	require.Equal(t, uint64(2*rows), releasedRows, "vmDebugFlush lost rows")
	require.Zero(t, keptPending)
	require.Zero(t, releasedPending, "rows still pending after vmDebugFlush")
}
