// Package storage is the appliance's embedded time-series store and the only
// importer of VictoriaMetrics' lib/ packages.
//
// # Basics
//
// A DB stores float samples in VictoriaMetrics' lib/storage engine and
// exposes them through Prometheus' own interfaces, so that Prometheus'
// scrape manager and remote-write receiver (storage.AppendableV2), its rules
// manager (storage.Appendable), its PromQL engine and its web/api/v1
// (storage.SampleAndChunkQueryable, storage.ExemplarQueryable and
// TSDBAdminStats) work on it unchanged.
//
// Layout under Options.Path:
//
//	tsdb/raw/   raw samples, kept for Options.RetentionRaw (default 7 days)
//	tsdb/1m/    1-minute rollups, kept for Options.Retention1m (30 days)
//	tsdb/5m/    5-minute rollups, kept for Options.Retention5m (90 days)
//	state.db    bbolt file for state that is not a time series; every
//	            package has its own bucket (this one: "storage.metadata",
//	            metric family metadata)
//
// Each tier is its own VictoriaMetrics storage with its own retention;
// VictoriaMetrics removes data past it. Open refuses 5m < 1m < raw.
//
// Metric metadata (type, help, unit) is kept per metric family, up to four
// variants each, in memory and in state.db, so /api/v1/metadata survives a
// restart.
//
// # Tiers
//
// Rollup windows are closed on the right like PromQL's range selectors:
// window w of resolution r holds the samples in (w*r, (w+1)*r]. Rollup
// (called by package downsample) turns the windows of one tier into rows
// of the next coarser one: raw into 1m, 1m into 5m.
//
// Representation. A rollup row carries the timestamp of the last sample of
// its window (as Thanos does; for gauges at most 1/60 of the window before
// its end, see Versions), and the series' own labels plus a reserved label
// __rollup__ (RollupLabel) naming the aggregate:
//
//	counter  counters, and the _bucket/_sum/_count series of histograms and
//	         summaries: the last sample of each window and every sample
//	         followed by a reset inside it, each at its own timestamp.
//	         Readers repeat each window's last sample 1ms after the
//	         window's end, where the counter still held that value, so a
//	         range (t-r, t] that starts on a window boundary finds the
//	         counter's value at its start; rate(), increase() and resets()
//	         then see the same resets and the same last value as on raw
//	         data, and the increase from boundary to boundary instead of
//	         raw's extrapolation over the first scrape interval (within
//	         0.4% of raw in downsample's accuracy tests).
//	max      gauges: the largest sample of the window
//	negmin   gauges: minus the smallest sample (negated so that the
//	         "largest wins" duplicate rule keeps the smallest)
//	sum      gauges: the sum of the window's samples
//	count    gauges: the number of samples
//	seen     gauges: the samples that came older than the raw retention,
//	         each at its own time (see Merging); never read by queries
//
// A series is a counter when its family's stored metadata says counter,
// histogram or summary (for the suffixed series); without metadata a
// _total, _bucket, _count or _sum suffix means counter; everything else is
// a gauge. Staleness markers are not rolled up.
//
// The rollup tiers use VictoriaMetrics' global index only (no per-day
// index: their series are long-lived), and CompactQuietMonths merges a
// finished month of a rollup tier into one part once nothing writes to it.
//
// Versions. A gauge window that gets samples after it was rolled up gets a
// new version of the aggregates that changed, and readers keep, per
// window, the version with the latest timestamp. A window's first version
// is written at most versionReserve (1/60 of the window: 1s in 1m, 5s in
// 5m) before the window's end, and each later one 1ms after the one it
// replaces, so the newest version always wins, whatever the values (sums
// of negative samples included); only a window rewritten more than 1,000
// times falls back to the duplicate rule (largest wins), which is still
// right for max, negmin and count. Counter points are samples at their own
// timestamps: a window that gets later samples gets its new last point,
// the earlier one stays (a true sample too).
//
// Merging: every rollup merges with what the tier already holds, so the
// answer does not depend on the order or grouping of the samples, and no
// sample counts twice:
//
//   - Within raw retention, Rollup recomputes the windows from raw, which
//     holds every sample once (a sender's retry writes the same samples
//     again, which raw's duplicate rule collapses), reads what the tier
//     holds for those windows, and writes only what differs: rolling a
//     window up again writes nothing, a late sample writes one new
//     version. Where the tier counts more samples than raw still has (raw
//     retention passed part of the window), the tier's version stays.
//   - Older than raw retention, Commit merges the samples straight into
//     the 1m and 5m tiers (rollupOld): it reads the windows' current
//     versions and seen samples, skips the samples whose timestamps are
//     seen already (a retry), adds the others to the aggregates as new
//     versions and records them as seen. Such merges are serialized and
//     flushed, so the next one finds them. A window that straddles the raw
//     horizon adds its seen samples back when it is recomputed from raw.
//
// In steady state this is one row per window per aggregate; a sample
// older than raw adds one seen row. Measured with downsample's accuracy
// tests (30 s scrapes): 0.73 1m-tier rows per raw sample for a 30-day
// backfill in random batches with retries, and for a live day sent the
// same way (in order, without late data: 0.66); before merging, the live
// day wrote 1.63.
//
// Paging. Rollup reads its source Options.RollupPageSize series at a
// time, with no series cap (queries have MaxSeriesPerQuery), so a window
// with any number of series is rolled up in bounded memory.
//
// Reading. DB.Querier stitches the tiers; DB.Raw is raw alone, for alert
// and recording rules. For each Select the querier splits the time range:
// the preferred tier is raw, or a coarser one when the step allows it
// (resolution <= step/5, SelectHints.Step; or a coarser one still where
// its answer is the same, see exactTier in tier_plan.go: a range query
// whose steps, offsets and ranges are whole windows of it and whose every
// selector is under max_over_time, rate or increase of a counter (from a
// rollup tier only), or a gauge's min, sum or count_over_time;
// AdaptForTiers then marks the selectors with __rollup__="<tier>" and
// widens nothing), never coarser than the limit in the context
// (WithMaxSourceResolution, the HTTP max_source_resolution);
// each part of the range is read from the preferred tier where it has data,
// else the next finer tier that has, else the next coarser one within the
// limit. Raw has data from its retention horizon on, a rollup tier from its
// horizon up to its watermark (SetRolledUpTo, set by the downsampler). The
// tiers read are recorded in the context's TierRecorder.
//
// From a rollup tier the querier reads, per SelectHints.Func:
// max_over_time and max read max; min_over_time and min read min;
// avg_over_time reads sum/count per window; sum_over_time reads sum; any
// other function, and a plain selector, reads the average (sum/count) of a
// gauge. Counters always read the counter rows. A matcher
// __rollup__="avg|max|min|sum|count" asks for an aggregate explicitly; on
// raw data count reads every sample as 1 (query rewrites count_over_time to
// a sum of it). Returned series never carry __rollup__; LabelNames and
// LabelValues hide it.
//
// What PromQL computes from this is exact over window-aligned ranges for
// resets, max_over_time, min_over_time, sum_over_time and count_over_time,
// and for avg_over_time when the windows have equal sample counts (a
// regular scrape); rate, increase and histogram_quantile of rates measure
// the increase between window boundaries where raw extrapolates over its
// first scrape interval, and agree with raw to a fraction of a percent. A range
// that starts inside a window reads that window whole or not at all. irate
// and idelta look at the last two raw samples and cannot be answered from
// rollups: on a rollup tier they see two rollup points. quantile_over_time,
// stddev_over_time, deriv and the like see one average per window.
// count_over_time of a counter finds nothing in a rollup tier (counters
// keep no count).
//
// Step reads. A range query whose windows (range, or lookback) are
// shorter than its step reads through SelectAtSteps (package query's
// StepSelecter): only the samples some step's window holds are kept, from
// raw as they are decoded, from a rollup tier once its points are made
// (a counter's boundary points depend on the rows around them). The
// engine sees the same samples in every window, so nothing it computes
// changes; at 90 days and a 4h20m step it is 3 of every 52 windows.
//
// Prometheus' engine computes range windows and the lookback itself and
// drops samples outside them, so a Select cannot widen them by returning
// more: AdaptForTiers rewrites the parsed query before the engine runs it
// (package query calls it through query.TierPlanner): range selectors
// shorter than two intervals of the coarsest tier read are widened to two,
// the lookback becomes at least two intervals, and count_over_time becomes
// a sum of the stored counts.
//
// # Who plans tiers
//
// Tier planning is this package's, and only this package's: choosing the
// tier for each part of a range (plan, TierForStep, CoarsestResolution,
// the max_source_resolution limit and the TierRecorder, in tier_plan.go),
// the PromQL rewrite that goes with the choice (AdaptForTiers, also
// there), stitching the parts per series (tiered.go) and the aggregate
// read from each rollup tier (tier_read.go). Why the storage side and not
// package query:
//
//   - The plan is a function of state only the storage holds and that
//     moves while queries run: each tier's retention horizon, the
//     watermarks the downsampler sets (SetRolledUpTo) and the storage's
//     clock (Options.Now).
//   - Not every read is PromQL. Prometheus' API calls Querier directly for
//     /api/v1/series, /api/v1/labels and label values, so a planner in the
//     engine would leave those reads to a second planner here.
//   - The rewrite follows from how rollups are stored (the __rollup__
//     aggregates, raw samples reading as 1 for count, the two rollup
//     points rate() needs in a window); next to the representation it
//     needs no copy of RollupLabel elsewhere.
//   - storage imports no other package of the appliance (only the leaf
//     internal/stepwin, which query shares), so the owner has
//     to be the lower one; query reaches the planner through its own
//     small interface (query.TierPlanner) and the engine stays unaware of
//     tiers beyond passing the lookback it is given.
//
// The others only call in: package query parses the query, calls
// AdaptForTiers and puts the lookback into Prometheus' query options;
// package ui reads max_source_resolution into the request context
// (WithMaxSourceResolution), records the tiers a request read
// (WithTierRecorder) and reports them in the X-Appliance-Tiers header and
// the "tiers" field; package downsample writes the rollups (Rollup) and
// moves the watermarks, and plans nothing.
//
// # Concurrency
//
// DB methods are safe for concurrent use. An appender (from AppenderV2 or
// Appender) belongs to one goroutine and must not be used after Commit or
// Rollback, as Prometheus' storage.Appender documents. Appenders buffer their
// samples in memory; Commit writes them to VictoriaMetrics in one call
// (and to the head), and Rollback drops them.
//
// # Durability
//
// Acknowledged means durable. Commit writes its samples to a write-ahead
// log under <Path>/wal before it hands them to VictoriaMetrics, and
// returns only after that write, so an HTTP 2xx (which follows Commit)
// means the samples survive kill -9. The log is Prometheus' tsdb/wlog
// (32 KiB pages with CRC32, 128 MiB segments, snappy) holding tsdb/record
// series and samples records keyed by the appenders' series refs.
//
// Fsync policy. An appender from a context marked WithSyncCommit (the
// HTTP ingest: remote write, text import) fsyncs the log before Commit
// returns, with group commit: concurrent commits share one fsync. Those
// senders drop their copy on 2xx, so a power loss must not lose it.
// Scrapes and rules write the log without an fsync: safe against a crash
// of the process (the OS has the bytes), not against a power loss, where
// the OS's dirty pages of up to about 30 s can be lost; a scrape repeats
// every interval and Prometheus itself does the same. Measured on this
// project's 2-core CI box (BenchmarkAppendWAL, BenchmarkWALLog; README):
// the log adds 17-22% to the CPU of a commit (about 0.17 µs a sample on
// 1.0 µs) and 7 bytes a sample; an fsync costs about 2 ms a commit on
// that disk, which a remote-write request of 2,000 samples can carry (1 µs
// a sample) and a scrape every few seconds need not.
//
// Trimming. Every 30 s the log starts a new generation: a new segment
// whose records name again every series they use. A generation is deleted
// 60 s after the next one began, by which time VictoriaMetrics has written
// its rows to files (it does within 2 s + 5 s). The log thus holds about
// the last 90 s of ingest. A clean Close, after VictoriaMetrics wrote
// everything, empties it.
//
// Replay. Open replays every segment into the store through the normal
// Commit path (old samples rolled up, the recent window fed), without
// logging them again and without the free-disk check: they were
// acknowledged. Samples VictoriaMetrics already had are stored twice with
// the same value, which readers' duplicate rule collapses. A torn tail (a
// power loss in the middle of a page) is cut at the last whole record with
// wlog's Repair, and the segment is logged. Replay is counted in
// appliance_storage_wal_replayed_samples_total.
//
// The head. Commit hands raw samples to VictoriaMetrics and then to an
// in-memory head (head.go), which raw reads (queries, rules, the series
// and label APIs, remote read) merge in, read before VictoriaMetrics and
// de-duplicated with it: a sample is queryable as soon as Commit returns,
// new series included (VictoriaMetrics alone shows a new series 6-20 s
// later: its row buffers, index buffers and tag-filters cache are flushed
// on their own timers). Commit leaves raw samples in the head
// (Options.HeadBatchWrites, on by default): Flush (the downsampler's,
// before it reads raw, about once a minute) closes a generation of the
// head, writes it to VictoriaMetrics, each series' samples next to each
// other (VictoriaMetrics' fast path), calls DebugFlush and then drops the
// generation; with no Flush for 30 s a Commit does it, and Close writes
// what is left. Each write costs VictoriaMetrics a fresh 8 MiB row buffer
// however few rows it carries, so fewer, larger writes are most of what
// the small box allocates less (README, "The small box"). With
// HeadBatchWrites off, Commit calls AddRows itself and the head only
// shows the rows until VictoriaMetrics does. The log is unchanged: a
// generation of it is deleted walKeep (90 s) after the next began, past
// the head's flushes, and replay goes through Commit. Not built yet
// (issue 17): rollups computed from the head at flush instead of read
// back from raw, and the log's trim tied to the head's flushes instead
// of walKeep.
//
// Free-disk watermark. Below Options.MinFreeDisk (storage.min_free_disk,
// default 100 MB, VictoriaMetrics' own default) Commit refuses samples
// with ErrDiskFull and counts them as
// appliance_storage_append_errors_total{reason="disk_full"}: scrapes are
// dropped, not buffered, and the HTTP ingest answers 503 (retryable).
// The check runs before the WAL write, books each commit's estimated bytes
// against the figure (statfs, re-read every 250 ms), and so refuses a
// commit that would cross the watermark. The appliance's own self-scrape
// (Options.SelfMonitoring) may go on down to half the watermark, so the
// self-alert on appliance_storage_read_only can fire; VictoriaMetrics'
// own read-only mode, which stops its merges, starts there too. Above the
// watermark again (plus 10%, so that it does not flap) commits are taken
// at once. Bytes a commit booked count against the free space for 30 s,
// until VictoriaMetrics has surely written them (statfs does not see rows
// it still holds in memory); a new series books 6 bytes of index per byte
// of its name. IngestError reports the state
// (/-/ready); appliance_storage_read_only, appliance_storage_free_disk_bytes
// and appliance_storage_min_free_disk_bytes show it.
//
// Series the index cannot hold. VictoriaMetrics' index skips an item over
// 64 KiB with a log line and acknowledges the sample, which then can never
// be found. Append refuses such a label set (MaxIndexedSeriesBytes, in the
// index's own encoding) with ErrInvalidSeries, so a scrape fails with the
// error (up 0, nothing of it stored) and the HTTP ingest answers 400.
//
// Series limit. With Options.MaxSeries (storage.max_series) the appender
// admits a new series only while fewer than that many are active: seen
// in the current or the previous hour-long generation of the guard
// (series_guard.go), by ref. A sample of a series past the limit is
// refused at Append with ErrSeriesLimit, which also matches
// ErrOutOfBounds so that Prometheus' scrape loop skips it and stores the
// rest of the scrape; it is counted per job and instance label in
// appliance_storage_series_refused_total and listed by SeriesLimit.
// Series already active keep flowing. The appliance's own series (the
// rule appenders, Appender and Own; the self-scrape) and WAL replay are
// counted and never refused; after a restart the guard knows the series
// the WAL replayed.
//
// # Caveats
//
// Precision. VictoriaMetrics stores values as decimals with one exponent per
// block of a series (up to 8k samples). A value keeps about 18 minus
// log10(largest/value) significant digits, where largest is the largest
// absolute value in its block: at least 12 digits while a series stays
// within six orders of magnitude, fewer for the small values of a series
// that also holds huge ones. Tests compare with a relative tolerance of 1e-12.
//
// NaN. Prometheus' staleness marker (value.StaleNaN) is stored and read back
// bit for bit. Any other NaN (a summary quantile without observations, for
// example) cannot be stored: Append accepts it, drops it and counts it as
// appliance_storage_append_errors_total{reason="nan"}. ±Inf are stored.
//
// Time range. A sample older than the longest retention or more than two
// days ahead is refused with storage.ErrOutOfBounds (the scrape loop counts
// those and goes on) and counted as reason="out_of_bounds". VictoriaMetrics
// itself would drop such rows silently, with a rate-limited log line. A
// sample older than the raw retention but within a rollup tier's cannot
// pass through raw (VictoriaMetrics would drop it): Commit merges such rows
// at once into the 1m and 5m tiers that keep their time (see Merging). A
// sample sent again after raw retention passed the first copy (more than
// RetentionRaw later) counts again in its gauge window's sum and count.
//
// Late samples. A Commit with samples at or before the 1m watermark calls
// the OnLateCommit hooks, so the downsampler rolls those windows up again.
//
// Native histograms are refused with storage.ErrNativeHistogramsDisabled;
// exemplars and start timestamps are accepted and not stored; the
// ExemplarQuerier finds nothing.
//
// Duplicates. Samples with the same timestamp in one series are merged at
// query time with VictoriaMetrics' rule: the largest value wins, and a
// staleness marker only when all of them are markers.
//
// Regexps in matchers are anchored as in Prometheus, but `.` does not match a
// newline inside a label value (Prometheus compiles with (?s)).
//
// Damaged files. Open checks, before VictoriaMetrics or bbolt read them
// (both panic on damaged files, VictoriaMetrics in goroutines of its own):
// state.db opens and every bucket, key and value in it reads (a fault on a
// page past the end of a truncated file included); and, in every tier,
// each partition's parts.json parses and names part directories that
// exist, and each part's metadata.json parses and its metaindex.bin and
// index.bin decode and fit the sizes of its data files (timestamps.bin and
// values.bin, or items.bin and lens.bin of the series index). A damaged
// file is an ErrDamaged error naming it and the fix: move the part out of
// the data directory and take its name off parts.json (its rows are lost;
// everything else is served), remove a garbled parts.json
// (VictoriaMetrics then lists the part directories), or move state.db
// aside. A missing or empty state.db next to existing series data is
// refused too (bbolt would start an empty one, and the alert state,
// silences and notification log with it) unless Options.StartFresh (the
// --storage.start-fresh flag) says to start with an empty state.
//
// Deleting. Delete removes whole series only, from every tier; a time range
// that does not cover all the data kept returns ErrNotSupported. Snapshot is
// not supported.
//
// Tiers and the Prometheus API. Remote read (ChunkQuerier) and
// /api/v1/status/tsdb (Stats) cover the raw tier only; TierStats reports
// every tier.
//
// Process-wide state. VictoriaMetrics registers its flags on
// flag.CommandLine and keeps global caches and a global logger. The first
// Open sets them, once per process: the cache budget (Options.MemoryBudget),
// WARN level, and its log lines go to the Logger of the DB opened last. The
// appliance never parses flag.CommandLine, so none of those flags reaches its
// command line.
package storage
