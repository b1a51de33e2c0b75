package storage

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/logger"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/memory"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// VictoriaMetrics' lib/ packages keep process-wide state: they register
// flags on flag.CommandLine at import time, size their caches from
// lib/memory (which panics unless flag.CommandLine has been parsed), size
// their row buffers from GOMAXPROCS (vmshards.go) and log through
// lib/logger straight to stderr. All of that is set here, once per
// process, and nowhere else. The appliance parses its own flag.FlagSet, so
// none of these flags is ever visible on its command line.

var (
	vmInitOnce sync.Once
	// vmMemoryBudget is the cache budget that won the race to vmInit; later
	// Open calls with another budget get the first one (lib/memory reads it once).
	vmMemoryBudget int64
	// vmInitErr is what vmInit failed with, returned to every later
	// call too: a store opened without the settings is not to be used.
	vmInitErr error

	// vmLog receives VictoriaMetrics' log lines. It is the logger of the DB
	// opened most recently, because lib/logger has a single output.
	vmLog atomic.Pointer[slog.Logger]
)

const (
	minMemoryBudget = 256 << 20
	maxMemoryBudget = 2 << 30
)

// defaultMemoryBudget is 25% of the memory available to the process
// (cgroup-aware), capped at 2 GiB and at least 256 MiB. VictoriaMetrics on its
// own would take 60%, which is too much on a box that also runs model servers.
func defaultMemoryBudget() int64 {
	b := systemMemory() / 4
	return min(max(b, minMemoryBudget), maxMemoryBudget)
}

// vmInit applies the process-wide VictoriaMetrics settings. It must run
// before the first MustOpenStorage.
func vmInit(budget, minFreeDisk int64, l *slog.Logger) error {
	if l != nil {
		vmLog.Store(l)
	}
	vmInitOnce.Do(func() {
		var err error
		defer func() { vmInitErr = err }()
		if budget <= 0 {
			budget = defaultMemoryBudget()
		}
		vmMemoryBudget = budget
		set := func(name, value string) {
			if err == nil {
				if e := flag.CommandLine.Set(name, value); e != nil {
					err = fmt.Errorf("set VictoriaMetrics flag -%s: %w", name, e)
				}
			}
		}
		set("memory.allowedBytes", strconv.FormatInt(budget, 10))
		// Lines are parsed by vmLogWriter: no timestamps (slog adds its own),
		// WARN and above only (INFO is chatty about every merge).
		set("loggerDisableTimestamps", "true")
		set("loggerLevel", "WARN")
		set("loggerFormat", "default")
		if err != nil {
			return
		}
		// lib/memory refuses to work before flag.Parse. Parsing an empty
		// argument list marks flag.CommandLine parsed without reading
		// os.Args; skip it when a test binary already parsed its flags.
		if !flag.Parsed() {
			if e := flag.CommandLine.Parse(nil); e != nil {
				err = fmt.Errorf("prepare VictoriaMetrics flags: %w", e)
				return
			}
		}
		logger.SetOutputForTests(vmLogWriter{})
		_ = memory.Allowed()
		// VictoriaMetrics' own read-only mode stops its merges (which
		// would panic on ENOSPC) at half of the appliance's watermark,
		// below which Commit already refuses new samples (diskspace.go).
		if minFreeDisk == 0 {
			minFreeDisk = DefaultMinFreeDisk
		}
		vmstorage.SetFreeDiskSpaceLimit(max(minFreeDisk/2, 0))
		// One raw-row shard per partition instead of one per core: each
		// holds 8 MiB for good (vmshards.go).
		if err = vmBoundRawRowShards(); err != nil {
			return
		}
		// Flushes take the shards' row buffers along (vmrawrows.go).
		err = vmRawRowsCheck()
	})
	return vmInitErr
}

// vmLogWriter turns lib/logger lines ("level\tlocation\tmessage\n", see
// loggerDisableTimestamps above) into slog records.
type vmLogWriter struct{}

func (vmLogWriter) Write(p []byte) (int, error) {
	l := vmLog.Load()
	if l == nil {
		return len(p), nil
	}
	line := bytes.TrimRight(p, "\n")
	level := slog.LevelWarn
	var location string
	if lvl, rest, ok := bytes.Cut(line, []byte{'\t'}); ok {
		switch string(lvl) {
		case "info":
			level = slog.LevelInfo
		case "warn":
			level = slog.LevelWarn
		default: // error, fatal, panic
			level = slog.LevelError
		}
		if loc, msg, ok := bytes.Cut(rest, []byte{'\t'}); ok {
			location, line = string(loc), msg
		} else {
			line = rest
		}
	}
	l.LogAttrs(context.Background(), level, string(line),
		slog.String("component", "victoriametrics"), slog.String("caller", location))
	return len(p), nil
}
