package notify

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	total    *prometheus.CounterVec
	queued   *prometheus.GaugeVec
	received prometheus.Counter
	// seen are the receivers queued was set for, so that a receiver
	// whose queue emptied drops to 0 instead of keeping its last value.
	seen map[string]bool
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_notifications_total",
			Help: "Attempts to deliver notifications, by receiver and result (sent, retried, failed).",
		}, []string{"receiver", "result"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "appliance_notifications_queued",
			Help: "Notifications in the outbox waiting for their receiver to accept them.",
		}, []string{"receiver"}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appliance_notify_alerts_received_total",
			Help: "Alerts received from the rules and the v2 API.",
		}),
		seen: map[string]bool{},
	}
	if reg != nil {
		reg.MustRegister(m.total, m.queued, m.received)
	}
	return m
}

func (m *metrics) setQueued(q map[string]float64) {
	for r := range m.seen {
		if _, ok := q[r]; !ok {
			m.queued.WithLabelValues(r).Set(0)
		}
	}
	for r, v := range q {
		m.seen[r] = true
		m.queued.WithLabelValues(r).Set(v)
	}
}
