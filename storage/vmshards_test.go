package storage

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// TestVMRawRowShards checks that opening a DB bounds VictoriaMetrics'
// raw-row shards, that the linked variable is the one lib/storage sizes
// its partitions' buffers by, and that the VictoriaMetrics version is the
// one whose raw_row.go vmshards.go was written against.
func TestVMRawRowShards(t *testing.T) {
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.Registerer = prometheus.NewRegistry()
	db, err := Open(opts)
	require.NoError(t, err)
	require.Equal(t, vmRawRowShards, vmNumRawRowsShards, "Open did not bound lib/storage.numRawRowsShards")
	// Closed before the stores below change the count: no partition of
	// its can be created meanwhile.
	require.NoError(t, db.Close())

	// The live heap a fresh store holds once shards rows have come in,
	// one AddRows call per shard (lib/storage hands the calls to its
	// shards in turn), after a collection.
	heldBy := func(shards int) uint64 {
		vmNumRawRowsShards = shards
		defer func() { vmNumRawRowsShards = vmRawRowShards }()
		vm, err := openVM(filepath.Join(t.TempDir(), "vm"), 24*time.Hour, false)
		require.NoError(t, err)
		defer vm.MustClose()
		raw, err := marshalRawName(nil, labels.FromStrings("__name__", "m"))
		require.NoError(t, err)
		before := liveHeap()
		now := time.Now().UnixMilli()
		for i := range 2 * shards {
			vm.AddRows([]vmstorage.MetricRow{{MetricNameRaw: raw, Timestamp: now + int64(i), Value: 1}}, precisionBits)
		}
		after := liveHeap()
		if after < before {
			return 0
		}
		return after - before
	}
	const buffer = 8 << 20 // lib/storage's maxRawRowsPerShard rows
	one, eight := heldBy(1), heldBy(8)
	// Eight shards hold seven more 8 MiB buffers than one; the margin is
	// for a flush (VictoriaMetrics' own, every 2 s) caught in between.
	t.Logf("live heap held by a fresh store: %d bytes with one shard, %d with eight", one, eight)
	require.Greater(t, eight, one+5*buffer,
		"eight shards held %d bytes, one %d: lib/storage.numRawRowsShards is not what sizes the row buffers", eight, one)

	// An upgrade must re-read lib/storage/raw_row.go: that the variable
	// still exists (vmBoundRawRowShards refuses to run otherwise), still
	// sets the shards per partition, and that each still holds a fixed
	// buffer. Then bump the version here.
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	require.Regexp(t, regexp.MustCompile(`(?m)^\s*github\.com/VictoriaMetrics/VictoriaMetrics v1\.151\.0$`), string(mod),
		"VictoriaMetrics changed version: re-check storage/vmshards.go against its lib/storage/raw_row.go")
}

// liveHeap is the heap in use after a full collection (two, so that
// sync.Pool's victim cache is emptied too).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
