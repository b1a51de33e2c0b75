// Package harness holds what the side-by-side benchmarks in bench/ share
// and what does not depend on the figures they measure: the systems they
// compare and how to build them (the anchors from the Go module proxy, the
// appliance from this module), the run directory and the command's
// scaffolding (flags, signals, exit status), running a system under test
// as a child process and reading its CPU time and memory from /proc,
// serving the simulated vLLM fleet it scrapes, timing PromQL range queries
// over Prometheus' HTTP API, reading counters from a /metrics page,
// measuring a data directory and printing Markdown tables.
//
// # Basics
//
// A benchmark command is func main() { os.Exit([Main](name, parseFlags,
// bench)) }. Its parseFlags defines its own flags and, for -only and
// -short, [DefineSystemFlags]; its systems are [Prometheus],
// [VictoriaMetrics] and [Appliance], each embedded in a struct with what
// only that benchmark needs (a [Contender]). bench makes a [RunDir],
// builds every system with [BuildAll] before measuring any, then measures
// them one after another with [MeasureEach]: each measurement starts a
// [Fleet] or uses a running one, starts the system with [Launch], samples
// it with [ReadProcStats] and [SumMetric], queries it with [QueryRange],
// stops it with [Process.Stop] and measures its data with [DirUsage]. The
// report's main table is a [Comparison], written with
// [RunDir.WriteReport].
//
// Lower-level pieces serve benchmarks that do not fit that mould
// (bench/tiers backfills instead of scraping): [GoInstall], [GoBuild],
// [Start], [WaitHTTP], [Table].
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
