package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every mainstream Linux architecture; reading it properly
// needs sysconf(_SC_CLK_TCK), which Go exposes only through cgo.
const ClockTicks = 100

// ProcStats is one reading of a process's resource use.
type ProcStats struct {
	CPU     time.Duration // user+system time of all its threads since start
	RSS     uint64        // resident set size now, bytes (VmRSS)
	PeakRSS uint64        // highest resident set size so far, bytes (VmHWM)
}

// ReadProcStats reads /proc/<pid>/stat and /proc/<pid>/status.
func ReadProcStats(pid int) (ProcStats, error) {
	var s ProcStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("read cpu time of pid %d: %w", pid, err)
	}
	if s.CPU, err = parseStatCPU(stat); err != nil {
		return s, fmt.Errorf("pid %d: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	if s.RSS, s.PeakRSS, err = parseStatusMemory(status); err != nil {
		return s, fmt.Errorf("pid %d: %w", pid, err)
	}
	return s, nil
}

// parseStatCPU returns utime+stime from the contents of /proc/<pid>/stat.
// The command name in field 2 may contain spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("cannot parse /proc stat %q: no ')'", stat)
	}
	// After ")": field 3 (state) is index 0, so utime (14) and stime (15)
	// are indexes 11 and 12.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("cannot parse /proc stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot parse utime %q: %w", f[11], err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot parse stime %q: %w", f[12], err)
	}
	return time.Duration(utime+stime) * time.Second / ClockTicks, nil
}

// parseStatusMemory returns VmRSS and VmHWM in bytes from the contents of
// /proc/<pid>/status.
func parseStatusMemory(status []byte) (rss, hwm uint64, err error) {
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("cannot parse %s %q: want \"<n> kB\"", key, val)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cannot parse %s: %w", key, err)
		}
		if key == "VmRSS" {
			rss, haveRSS = kb*1024, true
		} else {
			hwm, haveHWM = kb*1024, true
		}
	}
	if !haveRSS || !haveHWM {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM in /proc status (kernel thread or zombie?)")
	}
	return rss, hwm, nil
}
