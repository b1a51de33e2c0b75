package downsample

import (
	"github.com/aiserve/appliance/storage"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the appliance_downsample_* self-metrics.
type metrics struct {
	reg        prometheus.Registerer
	duration   *prometheus.HistogramVec
	rows       *prometheus.CounterVec
	errors     *prometheus.CounterVec
	collectors []prometheus.Collector
}

func newMetrics(d *Downsampler) *metrics {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "appliance_downsample_rollup_duration_seconds",
			Help:    "Time one rollup call took (up to Span1m or Span5m of data), by target tier.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"tier"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_downsample_rows_written_total",
			Help: "Rollup rows written, by target tier (windows rolled up again count again).",
		}, []string{"tier"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_downsample_errors_total",
			Help: "Rollup calls that failed, by target tier.",
		}, []string{"tier"}),
	}
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "appliance_downsample_lag_seconds",
		Help:        "How far the tier's watermark is behind now; in steady state between Delay and Delay plus one window (1m: 60-120s, 5m: up to 7m).",
		ConstLabels: prometheus.Labels{"tier": storage.Tier1m.String()},
	}, func() float64 { return d.lag(storage.Tier1m) })
	lag5 := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "appliance_downsample_lag_seconds",
		Help:        "How far the tier's watermark is behind now; in steady state between Delay and Delay plus one window (1m: 60-120s, 5m: up to 7m).",
		ConstLabels: prometheus.Labels{"tier": storage.Tier5m.String()},
	}, func() float64 { return d.lag(storage.Tier5m) })
	m.collectors = []prometheus.Collector{m.duration, m.rows, m.errors, lag, lag5}
	return m
}

func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	m.reg = reg
	return nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
	m.reg = nil
}
