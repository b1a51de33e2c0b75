//go:build unix

package ui

import "syscall"

// RaiseFileLimit raises the soft limit of open files to the hard limit, as
// Prometheus and VictoriaMetrics do at start, and returns the soft limit
// now in force (0 when it cannot be read).
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		}
	}
	return uint64(lim.Cur), nil
}
