// Package harness holds the parts of the side-by-side benchmarks in bench/
// that do not depend on what is being measured: building the anchor
// binaries from the Go module proxy, running a system under test as a child
// process and reading its CPU time and memory from /proc, timing PromQL
// range queries over Prometheus' HTTP API, reading counters from a
// /metrics page, measuring a data directory and printing Markdown tables.
//
// # Basics
//
// A benchmark builds its binaries with [GoInstall] (anchors pinned to a
// version) and [GoBuild] (the appliance from this module), starts each
// system with [Start], waits for it with [WaitHTTP], samples it with
// [ReadProcStats] and [SumMetric], queries it with [QueryRange], stops it
// with [Process.Stop] and measures its data with [DirUsage].
//
// # Caveats
//
// CPU time and memory are read from /proc/<pid>, so the figures cover the
// system under test only, never the harness or a fleet it serves in its
// own process; this is Linux-only. CPU time counts all threads of the
// process (utime+stime), not its children. [ClockTicks] assumes the usual
// USER_HZ of 100.
//
// Every child process is started in its own process group with
// Pdeathsig=SIGKILL, and [Process.Stop] or [Process.Kill] must be called
// (typically deferred) so that none outlives the benchmark, including on
// Ctrl-C.
package harness
