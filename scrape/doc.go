// Package scrape turns the config's scrape_configs into running scrapes.
//
// It wires Prometheus' own service discovery manager (static and file-based
// discovery, plus HTTP SD) to Prometheus' own scrape manager, which writes
// through a storage.AppendableV2 of the caller's. So `up`,
// `scrape_duration_seconds`, `scrape_samples_scraped`, staleness markers,
// relabelling, sample/label/body limits, target health and the last error
// behave exactly as in Prometheus, for text format 0.0.4 and OpenMetrics.
//
// A job with scrape_native_histograms: true asks for the protobuf
// exposition first (Prometheus' DefaultProtoFirstScrapeProtocols) and its
// native histograms come out of Prometheus' protobuf parser; the caller's
// Appendable is expected to store them (cmd/appliance wraps the storage
// with internal/histconv, which writes them as classic _bucket, _count and
// _sum series, and internal/exemplars, which keeps OpenMetrics and
// protobuf exemplars).
//
// A Scraper is built with New, configured with ApplyConfig (also on reload),
// and runs in Run until its context ends. Later parts add auto-detected
// targets and local collectors here.
package scrape
