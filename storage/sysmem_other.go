//go:build !linux

package storage

// systemMemory is a conservative guess where the kernel is not asked: 4 GiB,
// which makes the default cache budget 1 GiB.
func systemMemory() int64 { return 4 << 30 }
