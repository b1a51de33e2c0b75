// Package downsample rolls the raw tier up into the 1-minute tier and the
// 1-minute tier into the 5-minute tier, in the background.
//
// # Basics
//
// New loads the progress from the storage's bbolt state file (bucket
// "downsample") and starts nothing; Run runs a pass every Interval until
// its context ends, and Step runs one pass. A pass:
//
//  1. takes in the time ranges of late samples the storage reported
//     (storage.DB.OnLateCommit: raw samples committed below the 1m
//     watermark, from remote write, /api/v1/import/prometheus or a slow
//     target) and saves them as dirty spans;
//  2. rolls every raw 1-minute window that ended Delay ago up into the 1m
//     tier, in calls of at most Span1m (halved, down to one window, while
//     a page of a call would load more than the storage's
//     MaxSamplesPerQuery), and moves the 1m watermark. Each call pages
//     through the window's series (storage.Options.RollupPageSize), so no
//     series count stops it;
//  3. rolls the dirty 1m windows below the watermark it started from up
//     again (the storage writes only what changed) and marks the 5m
//     windows over them dirty;
//  4. does the same from 1m into 5m, up to the 1m watermark;
//  5. saves the watermarks and dirty lists that are durable.
//
// What a rollup row holds (the last sample per window and the
// samples before resets for counters, min/max/sum/count for gauges, the
// timestamp of the window's last sample) is the storage package's
// business: see its doc, "Tiers".
//
// Self-metrics: appliance_downsample_lag_seconds{tier} (now minus the
// watermark), appliance_downsample_rollup_duration_seconds{tier} (one
// Rollup call), appliance_downsample_rows_written_total{tier} and
// appliance_downsample_errors_total{tier}. The rule pack "appliance"
// (group appliance-downsample) raises DownsamplingBehind (P1) when the lag
// exceeds five windows (300s on 1m, 1500s on 5m) for 2 minutes.
//
// Scale: TestManySeriesInOneMinute rolls up more series in one minute than
// the query cap allows (DOWNSAMPLE_SERIES=1500000 for 1.5 million), and
// TestLagAlertFiresWhileBehindAndResolves evaluates DownsamplingBehind on
// the self-scraped lag through an outage and the catch-up after it.
// `go run ./bench/rollup` does the same at 1.5 million series in real time
// and prints how long after its close each window was rolled up (see the
// README, "Downsampled tiers").
//
// # Restarts
//
// Rolling a window up again writes only what changed in it (nothing,
// when nothing did): re-running a window is idempotent. Progress is therefore
// saved late, never early: a watermark is written to bbolt only
// DurableAfter (30s) after the rows below it were written, because
// VictoriaMetrics keeps fresh rows in memory for a few seconds and kill -9
// loses them. After any crash the downsampler resumes from a watermark
// whose rows are on disk and redoes at most the last DurableAfter of work;
// no window is skipped and none is present twice.
//
// # Caveats
//
// Late samples reported by the storage but not yet taken in by a pass (at
// most one Interval's worth) are lost on a crash, so their windows keep the
// rollup made without them. The raw data is unaffected, and a later late
// sample in the same window repairs it.
//
// A window whose late samples arrive after Delay gets a new version of
// the aggregates they change; the readers keep the newer version per
// window (see storage's doc, "Versions").
//
// Data older than the raw retention never passes through here: the
// storage rolls it up at Commit.
package downsample
