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
	"time"

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
}

type fwdTarget struct {
	url     string
	client  *http.Client
	timeout time.Duration
	relabel []*relabel.Config
}

func newForwarder(logger *slog.Logger) *forwarder {
	return &forwarder{logger: logger, wake: make(chan struct{}, 1)}
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
			f.logger.Warn("alerts for alerting.alertmanagers dropped: the queue is full", "dropped", dropped)
		}
		if len(batch) == 0 {
			continue
		}
		var wg sync.WaitGroup
		for _, t := range targets {
			wg.Go(func() {
				if err := t.send(ctx, relabelAlerts(batch, ext, append(slices.Clone(rl), t.relabel...))); err != nil {
					f.logger.Warn("cannot send alerts to an Alertmanager of alerting.alertmanagers", "url", t.url, "alerts", len(batch), "err", err)
				}
			})
		}
		wg.Wait()
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
