package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/aiserve/appliance/notify/alertmanager"
)

// forwardQueue caps the alerts waiting to be forwarded, as Prometheus'
// notifier queue (--alertmanager.notification-queue-capacity): the oldest
// are dropped beyond it.
const forwardQueue = 10000

// forwarder sends the rules' alerts to the Alertmanagers of
// alerting.alertmanagers as Prometheus' notifier does: POST
// <scheme>://<target><path_prefix>/api/v2/alerts, with the http_config
// (basic_auth, authorization, TLS, proxy) of each, after the
// alert_relabel_configs. It is the appliance's own routing's sibling, not
// part of it: what it sends is not grouped, silenced or inhibited here.
type forwarder struct {
	logger *slog.Logger

	mu      sync.Mutex
	targets []*fwdTarget
	relabel []*relabel.Config
	ext     labels.Labels
	queue   []model.Alert
	dropped int
	wake    chan struct{}

	m fwdMetrics
}

// fwdMetrics are Prometheus' notifier metrics under its names, so that
// its self-monitoring rules (notification backlog, errors sending to
// Alertmanagers) work unchanged. prometheus_notifications_alertmanagers_discovered
// is present only while alerting.alertmanagers has targets: the appliance
// routes alerts itself, and without forwarding "not connected" is no fault.
type fwdMetrics struct {
	latency *prometheus.SummaryVec
	errors  *prometheus.CounterVec
	sent    *prometheus.CounterVec
	dropped prometheus.Counter
}

func newFwdMetrics() fwdMetrics {
	const sub = "prometheus_notifications_"
	return fwdMetrics{
		latency: prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name:       sub + "latency_seconds",
			Help:       "Latency quantiles for sending alert notifications to alerting.alertmanagers.",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		}, []string{"alertmanager"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: sub + "errors_total",
			Help: "Total number of alerts forwarded to alerting.alertmanagers affected by errors.",
		}, []string{"alertmanager"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: sub + "sent_total",
			Help: "Total number of alerts forwarded to alerting.alertmanagers.",
		}, []string{"alertmanager"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: sub + "dropped_total",
			Help: "Total number of alerts dropped: the forwarding queue was full, or no Alertmanager accepted them.",
		}),
	}
}

var (
	descQueueLength = prometheus.NewDesc("prometheus_notifications_queue_length", "The number of alert notifications in the queue.", nil, nil)
	descQueueCap    = prometheus.NewDesc("prometheus_notifications_queue_capacity", "The capacity of the alert notifications queue.", nil, nil)
	descDiscovered  = prometheus.NewDesc("prometheus_notifications_alertmanagers_discovered", "The number of alertmanagers discovered and active.", nil, nil)
)

// Describe and Collect make the forwarder its metrics' collector.
func (f *forwarder) Describe(ch chan<- *prometheus.Desc) {
	f.m.latency.Describe(ch)
	f.m.errors.Describe(ch)
	f.m.sent.Describe(ch)
	f.m.dropped.Describe(ch)
	ch <- descQueueLength
	ch <- descQueueCap
	ch <- descDiscovered
}

func (f *forwarder) Collect(ch chan<- prometheus.Metric) {
	f.m.latency.Collect(ch)
	f.m.errors.Collect(ch)
	f.m.sent.Collect(ch)
	f.m.dropped.Collect(ch)
	f.mu.Lock()
	queued, targets := len(f.queue), len(f.targets)
	f.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descQueueLength, prometheus.GaugeValue, float64(queued))
	ch <- prometheus.MustNewConstMetric(descQueueCap, prometheus.GaugeValue, forwardQueue)
	if targets > 0 {
		ch <- prometheus.MustNewConstMetric(descDiscovered, prometheus.GaugeValue, float64(targets))
	}
}

type fwdTarget struct {
	url     string
	client  *http.Client
	timeout time.Duration
	relabel []*relabel.Config
}

func newForwarder(logger *slog.Logger) *forwarder {
	return &forwarder{logger: logger, wake: make(chan struct{}, 1), m: newFwdMetrics()}
}

// fwdTargets builds the targets of alerting.alertmanagers: the static
// targets of each config (other discoveries are not resolved).
func fwdTargets(ams []*promconfig.AlertmanagerConfig) ([]*fwdTarget, error) {
	var out []*fwdTarget
	for i, am := range ams {
		cl, err := commoncfg.NewClientFromConfig(am.HTTPClientConfig, "alertmanager")
		if err != nil {
			return nil, fmt.Errorf("alerting.alertmanagers[%d]: %w", i, err)
		}
		for _, sd := range am.ServiceDiscoveryConfigs {
			st, ok := sd.(discovery.StaticConfig)
			if !ok {
				return nil, fmt.Errorf("alerting.alertmanagers[%d]: only static_configs are supported, not %s_sd_configs", i, sd.Name())
			}
			for _, tg := range st {
				for _, t := range tg.Targets {
					u := url.URL{Scheme: am.Scheme, Host: string(t[model.AddressLabel]), Path: path.Join("/", am.PathPrefix, "/api/v2/alerts")}
					out = append(out, &fwdTarget{url: u.String(), client: cl, timeout: time.Duration(am.Timeout), relabel: am.AlertRelabelConfigs})
				}
			}
		}
	}
	return out, nil
}

// apply switches to new targets, alert relabeling and external labels.
func (f *forwarder) apply(ts []*fwdTarget, rl []*relabel.Config, ext labels.Labels) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets, f.relabel, f.ext = ts, rl, ext
	if len(ts) == 0 {
		f.queue = nil
	}
}

// enqueue takes alerts to forward; it does not block.
func (f *forwarder) enqueue(as []model.Alert) {
	f.mu.Lock()
	if len(f.targets) == 0 {
		f.mu.Unlock()
		return
	}
	f.queue = append(f.queue, as...)
	if over := len(f.queue) - forwardQueue; over > 0 {
		f.queue = f.queue[over:]
		f.dropped += over
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run sends what is queued until ctx ends.
func (f *forwarder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		f.mu.Lock()
		batch, targets, rl, ext, dropped := f.queue, f.targets, f.relabel, f.ext, f.dropped
		f.queue, f.dropped = nil, 0
		f.mu.Unlock()
		if dropped > 0 {
			f.m.dropped.Add(float64(dropped))
			f.logger.Warn("alerts for alerting.alertmanagers dropped: the queue is full", "dropped", dropped)
		}
		if len(batch) == 0 {
			continue
		}
		var (
			wg sync.WaitGroup
			ok atomic.Bool
		)
		for _, t := range targets {
			wg.Go(func() {
				as := relabelAlerts(batch, ext, append(slices.Clone(rl), t.relabel...))
				begin := time.Now()
				err := t.send(ctx, as)
				if len(as) > 0 {
					// As Prometheus counts: every alert of an attempt is
					// sent, those of a failed one also errors.
					f.m.latency.WithLabelValues(t.url).Observe(time.Since(begin).Seconds())
					f.m.sent.WithLabelValues(t.url).Add(float64(len(as)))
				}
				if err != nil {
					f.m.errors.WithLabelValues(t.url).Add(float64(len(as)))
					f.logger.Warn("cannot send alerts to an Alertmanager of alerting.alertmanagers", "url", t.url, "alerts", len(batch), "err", err)
					return
				}
				ok.Store(true)
			})
		}
		wg.Wait()
		if !ok.Load() && ctx.Err() == nil {
			f.m.dropped.Add(float64(len(batch)))
		}
	}
}

// relabelAlerts adds the external labels an alert does not have, as
// Prometheus does, then applies alert relabeling; an alert whose labels
// are dropped is not sent.
func relabelAlerts(as []model.Alert, ext labels.Labels, rl []*relabel.Config) []alertmanager.PostableAlert {
	out := make([]alertmanager.PostableAlert, 0, len(as))
	for _, a := range as {
		ls := toMap(a.Labels)
		ext.Range(func(l labels.Label) {
			if _, ok := ls[l.Name]; !ok {
				ls[l.Name] = l.Value
			}
		})
		if len(rl) > 0 {
			lb := labels.NewBuilder(labels.FromMap(ls))
			if !relabel.ProcessBuilder(lb, rl...) || lb.Labels().IsEmpty() {
				continue
			}
			ls = lb.Labels().Map()
		}
		out = append(out, alertmanager.PostableAlert{Labels: ls, Annotations: toMap(a.Annotations), StartsAt: a.StartsAt, EndsAt: a.EndsAt, GeneratorURL: a.GeneratorURL})
	}
	return out
}

func (t *fwdTarget) send(ctx context.Context, as []alertmanager.PostableAlert) error {
	if len(as) == 0 {
		return nil
	}
	body, err := json.Marshal(as)
	if err != nil {
		return err
	}
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bad response status %s", resp.Status)
	}
	return nil
}
