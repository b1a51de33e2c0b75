// Package storagetest opens a real storage.DB for tests and reads back what
// was written to it.
//
// Tests that need somewhere to append use Open instead of a hand-written
// Appendable: a fake that keeps only the last value of each series hides
// what the real store does with timestamps (two samples of one series at
// the same millisecond merge, the larger value winning, and a staleness
// marker wins only over another marker; samples outside retention are
// refused). The DB lives in t.TempDir() and is closed by t.Cleanup, before
// the directory is removed.
//
// # Reading back
//
// Select and Last flush the DB first, so a sample committed before the
// call is visible to it (without Flush VictoriaMetrics makes it searchable
// within about a second). They read through the DB's Querier, the same path
// PromQL uses.
package storagetest
