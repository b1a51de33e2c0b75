package remotewrite

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are Prometheus' remote storage self-metrics, labelled by
// remote_name and url as Prometheus labels them.
type metrics struct {
	samples, failed, retried, dropped, bytes *prometheus.CounterVec
	pending, highestSent, highestIn          *prometheus.GaugeVec
}

// queueMetrics are one remote's.
type queueMetrics struct {
	samples, failed, retried, dropped, bytes prometheus.Counter
	pending, highestSent, highestIn          prometheus.Gauge
}

func newMetrics() *metrics {
	l := []string{"remote_name", "url"}
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, l)
	}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, l)
	}
	return &metrics{
		samples:     c("prometheus_remote_storage_samples_total", "Total number of samples sent to remote storage."),
		failed:      c("prometheus_remote_storage_samples_failed_total", "Total number of samples which failed on send to remote storage, non-recoverable errors."),
		retried:     c("prometheus_remote_storage_samples_retried_total", "Total number of samples which failed on send to remote storage but were retried because the send error was recoverable."),
		dropped:     c("prometheus_remote_storage_samples_dropped_total", "Total number of samples dropped from the on-disk queue because it reached max_disk_bytes (oldest first), or could not be written to it."),
		bytes:       c("prometheus_remote_storage_bytes_total", "The total number of bytes of data (not metadata) sent by the queue after compression."),
		pending:     g("prometheus_remote_storage_samples_pending", "The number of samples pending in the queue (on disk) waiting to be sent to the remote storage."),
		highestSent: g("prometheus_remote_storage_queue_highest_sent_timestamp_seconds", "Timestamp from a sample in the last batch successfully sent by the queue, in seconds since epoch."),
		highestIn:   g("prometheus_remote_storage_highest_timestamp_in_seconds", "Highest timestamp that has come into the queue, in seconds since epoch."),
	}
}

func (m *metrics) forRemote(name, url string) *queueMetrics {
	return &queueMetrics{
		samples:     m.samples.WithLabelValues(name, url),
		failed:      m.failed.WithLabelValues(name, url),
		retried:     m.retried.WithLabelValues(name, url),
		dropped:     m.dropped.WithLabelValues(name, url),
		bytes:       m.bytes.WithLabelValues(name, url),
		pending:     m.pending.WithLabelValues(name, url),
		highestSent: m.highestSent.WithLabelValues(name, url),
		highestIn:   m.highestIn.WithLabelValues(name, url),
	}
}

// forget removes a remote's series (it was removed or replaced).
func (m *metrics) forget(name, url string) {
	for _, v := range []*prometheus.CounterVec{m.samples, m.failed, m.retried, m.dropped, m.bytes} {
		v.DeleteLabelValues(name, url)
	}
	for _, v := range []*prometheus.GaugeVec{m.pending, m.highestSent, m.highestIn} {
		v.DeleteLabelValues(name, url)
	}
}

func (m *metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.samples, m.failed, m.retried, m.dropped, m.bytes, m.pending, m.highestSent, m.highestIn}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}
