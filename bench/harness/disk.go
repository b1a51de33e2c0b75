package harness

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// DiskUsage is the size of a directory tree.
type DiskUsage struct {
	Allocated int64 // blocks on disk, what `du` prints
	Apparent  int64 // sum of file lengths, what `du --apparent-size` prints
	Files     int
}

// DirUsage walks dir and adds up its regular files. Allocated counts
// 512-byte blocks, so preallocated or sparse files (a WAL segment, an
// mmapped chunk file) show their real cost rather than their length.
func DirUsage(dir string) (DiskUsage, error) {
	var u DiskUsage
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		u.Files++
		u.Apparent += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			u.Allocated += st.Blocks * 512
		} else {
			u.Allocated += info.Size()
		}
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("measure %s: %w", dir, err)
	}
	return u, nil
}
