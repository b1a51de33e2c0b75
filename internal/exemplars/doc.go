// Package exemplars keeps the exemplars of scraped and pushed samples in
// memory and answers /api/v1/query_exemplars from them.
//
// It is Prometheus' own circular exemplar storage
// (tsdb.CircularExemplarStorage): one ring of storage.exemplars.max_exemplars
// entries (default 100000, as Prometheus) shared by all series, the oldest
// overwritten first, nothing kept across a restart. Prometheus keeps them
// the same way (its WAL replay aside), but allocates the whole ring at
// start (6.6 MB at 100000); here it starts at 256 entries and doubles
// when the exemplars it took fill it, up to the bound, so a box whose
// targets send none pays nothing.
//
// Storage.Appender wraps the storage's appender: exemplars given inline
// (storage.AOptions.Exemplars, how the scrape loop passes OpenMetrics
// exemplars) or through AppendExemplars (remote write) are held until the
// samples' Commit succeeds, then added; a Rollback drops them. An exemplar
// the ring refuses (out of order, label set too long) is dropped and
// counted, and never fails the samples.
//
// Select answers an empty list, never nil, when nothing matches, so the
// API answers `"data": []` as Prometheus does.
package exemplars
