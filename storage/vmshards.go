package storage

import (
	"fmt"
	_ "unsafe" // for go:linkname
)

// VictoriaMetrics' lib/storage buffers incoming rows per partition in
// numRawRowsShards shards, one per GOMAXPROCS as read when the package is
// initialised (lib/storage/raw_row.go, v1.151.0). Each shard allocates an
// 8 MiB row buffer (maxRawRowsPerShard, a constant) on its first row and
// keeps it for as long as the partition is open, and the appliance opens
// three stores (raw, 1m, 5m). On the 2-core development box that is
// 2 × 3 × 8 MiB = 48 MiB of a 73 MB heap at about 3,000 series; on a
// 32-core GPU server it would be 768 MiB, whatever the load. Neither the
// count nor the size is a setting of lib/storage, so the count is set
// here, once, before the first store is opened.
//
// One shard is enough for the appliance: a shard costs its AddRows a
// mutex around a copy of the rows (tens of nanoseconds per row), while
// the same call spends over a microsecond per row looking up each series
// ID (issue 17's profile), so more shards buy nothing measurable at the
// 100,000 series the appliance is sized for. A shard that fills (about
// 170,000 rows, between VictoriaMetrics' 2-second flushes) is flushed
// into a part at once, as with any count.
//
// The link is to an unexported variable of a pinned VictoriaMetrics
// version (go.mod). Should a later version rename or drop it, this
// declaration would silently become a variable of its own and the bound
// would do nothing; vmBoundRawRowShards therefore refuses to run unless
// it finds the value lib/storage's initialiser wrote (at least 1), and
// TestVMRawRowShards pins the version so that an upgrade re-reads
// raw_row.go.

// vmNumRawRowsShards is lib/storage's numRawRowsShards.
//
//go:linkname vmNumRawRowsShards github.com/VictoriaMetrics/VictoriaMetrics/lib/storage.numRawRowsShards
var vmNumRawRowsShards int

// vmRawRowShards is the number of raw-row shards each partition of each
// store gets: one 8 MiB buffer per partition receiving rows.
const vmRawRowShards = 1

// vmBoundRawRowShards sets lib/storage's shard count to vmRawRowShards, or
// fails if the linked variable is not lib/storage's. It must run before
// the first MustOpenStorage (partitions read the count when they are
// created) and only once (vmInit).
func vmBoundRawRowShards() error {
	if found := vmNumRawRowsShards; found < 1 {
		return fmt.Errorf("bound VictoriaMetrics' raw-row shards: lib/storage.numRawRowsShards is %d, not the GOMAXPROCS its initialiser sets; the linked symbol is gone from this VictoriaMetrics version (see storage/vmshards.go)", found)
	}
	vmNumRawRowsShards = vmRawRowShards
	return nil
}
