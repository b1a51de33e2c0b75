package storage

import (
	"math"
	"syscall"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/cgroup"
)

// systemMemory returns the memory available to the process: the smaller of
// physical RAM and the cgroup limit, the way lib/memory computes it.
func systemMemory() int64 {
	var si syscall.Sysinfo_t
	total := int64(math.MaxInt64)
	if err := syscall.Sysinfo(&si); err == nil && si.Totalram > 0 {
		if uint64(si.Totalram) <= math.MaxInt64/uint64(si.Unit) {
			total = int64(uint64(si.Totalram) * uint64(si.Unit))
		}
	}
	for _, limit := range []int64{cgroup.GetMemoryLimit(), cgroup.GetHierarchicalMemoryLimit()} {
		if limit > 0 && limit < total {
			return limit
		}
	}
	if total == math.MaxInt64 {
		return 4 << 30
	}
	return total
}
