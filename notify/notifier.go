package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/alertmanager/timeinterval"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/notifier"
	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// Options configure a Notifier.
type Options struct {
	// DB is the bbolt state file; the notifier creates its buckets.
	DB *bolt.DB
	// Config is the alerting section; defaults are applied to it.
	Config config.AlertingConfig
	// ExternalURL is the appliance's own URL, for links in messages.
	ExternalURL string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// TickInterval is how often Run does the due work.
	TickInterval time.Duration
	Logger       *slog.Logger
	// Registerer takes the self-metrics; nil registers none.
	Registerer prometheus.Registerer
	// HTTPClient sends the receivers' requests; nil is a client with
	// deliver.Timeout.
	HTTPClient *http.Client
	// Version is shown by /api/v2/status.
	Version string
	// DrainTimeout bounds shutdown: when Run's context ends, the delivery
	// in flight and one last dispatch get this long before they are cut
	// off (what is not accepted stays in the outbox for the next start).
	// 0 is DefaultDrainTimeout.
	DrainTimeout time.Duration
}

// DefaultDrainTimeout is the drain at shutdown when Options leave it 0;
// it leaves room in the five seconds a service manager typically waits.
const DefaultDrainTimeout = 2 * time.Second

// DefaultOptions returns options with a one second tick.
func DefaultOptions() Options {
	return Options{TickInterval: time.Second, Now: time.Now, Logger: slog.Default(), DrainTimeout: DefaultDrainTimeout}
}

// Notifier routes alerts and delivers notifications; see the package doc.
// Its methods may be called concurrently.
type Notifier struct {
	opts Options
	db   *bolt.DB
	now  func() time.Time
	log  *slog.Logger
	m    *metrics
	// started is when the notifier was made, for /api/v2/status uptime.
	started time.Time

	// mu guards what follows. It is held for writing only for work in
	// memory that is linear in the alerts at most (posting, the decisions
	// of a flush); the database and the receivers are used without it, and
	// the API reads under it held for reading.
	mu         sync.RWMutex
	cfg        config.AlertingConfig
	root       *route
	inhibit    *inhibitor
	intervener *timeinterval.Intervener
	receivers  map[string][]*integration
	templates  *message.Templates
	severities config.Severities
	// resolve is alerting.global.resolve_timeout.
	resolve time.Duration
	// fwd forwards the rules' alerts to alerting.alertmanagers; it has
	// its own lock.
	fwd    *forwarder
	alerts map[model.Fingerprint]*alert
	groups map[string]*aggGroup
	// sil has its own lock.
	sil    *silences
	warned map[string]bool
	// nextDigest is when the digest goes out next (also in bbolt).
	nextDigest  time.Time
	lastNflogGC time.Time

	// wake makes Run tick before its next TickInterval: a new group
	// with group_wait 0s signals it, so it is sent at once.
	wake chan struct{}
	// tickMu serialises ticks.
	tickMu sync.Mutex
	// deliverMu serialises deliveries: one message is never sent by two
	// ticks at once.
	deliverMu sync.Mutex
	// afterSend, when set (tests), runs after a receiver accepted a
	// message and before the outbox forgets it; an error stops the
	// delivery there, as a crash would.
	afterSend func(e *outboxEntry) error
}

// integration is one entry of a receiver (one webhook_configs item, ...).
type integration struct {
	name     string // receiver/type/index
	receiver string
	message.Notifier
	// templates, when set, render this integration's messages instead of
	// the section's (Alertmanager's per-integration title and text).
	templates *message.Templates
}

// aggGroup is an aggregation group: the alerts of one route with the same
// group labels.
type aggGroup struct {
	key    string
	route  *route
	labels model.LabelSet
	fps    map[model.Fingerprint]bool
	next   time.Time // when it flushes next
}

// New makes a Notifier and loads its state (silences, outbox) from the
// database. It starts nothing; call Run.
func New(opts Options) (*Notifier, error) {
	if opts.DB == nil {
		return nil, errors.New("notify: no database")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.TickInterval <= 0 {
		opts.TickInterval = time.Second
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	n := &Notifier{
		opts: opts, db: opts.DB, now: opts.Now, log: opts.Logger,
		alerts: map[model.Fingerprint]*alert{}, groups: map[string]*aggGroup{}, warned: map[string]bool{},
		wake: make(chan struct{}, 1),
	}
	n.started = n.now()
	err := n.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketOutbox, bucketNflog, bucketHistory, bucketSilences, bucketDigest} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create notify buckets: %w", err)
	}
	if n.sil, err = loadSilences(n.db, n.now()); err != nil {
		return nil, fmt.Errorf("load silences: %w", err)
	}
	n.m = newMetrics(opts.Registerer)
	n.fwd = newForwarder(opts.Logger)
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(n.fwd); err != nil {
			return nil, fmt.Errorf("register forwarding metrics: %w", err)
		}
	}
	if err := n.ApplyConfig(opts.Config); err != nil {
		return nil, err
	}
	return n, nil
}

// ApplyConfig switches to a new alerting section. Groups are rebuilt from
// the alerts at hand and wait group_wait again; the notification log keeps
// them from repeating what was sent. An error leaves the old config.
func (n *Notifier) ApplyConfig(c config.AlertingConfig) error {
	p, err := n.Prepare(c)
	if err != nil {
		return err
	}
	return n.Apply(p)
}

// Prepared is an alerting section with its receivers, templates and time
// intervals built, ready for Apply.
type Prepared struct {
	cfg        config.AlertingConfig
	receivers  map[string][]*integration
	templates  *message.Templates
	intervener *timeinterval.Intervener
	loc        *time.Location
	severities config.Severities
	fwd        []*fwdTarget
}

// Prepare builds the routes' receivers, the message templates, the time
// intervals and the digest's schedule of c; it changes nothing.
func (n *Notifier) Prepare(c config.AlertingConfig) (*Prepared, error) {
	c = c.Resolved()
	recv, err := buildReceivers(c, n.opts.HTTPClient, n.now)
	if err != nil {
		return nil, err
	}
	ti := map[string][]timeinterval.TimeInterval{}
	for _, t := range c.TimeIntervals {
		ti[t.Name] = t.TimeIntervals
	}
	tmpl, err := message.ParseTemplateFiles(c.Templates.Title, c.Templates.Text, c.Templates.Files)
	if err != nil {
		return nil, err
	}
	if _, _, err := c.Digest.Clock(); err != nil {
		return nil, err
	}
	loc, err := c.Digest.Location()
	if err != nil {
		return nil, err
	}
	fwd, err := fwdTargets(c.Alertmanagers)
	if err != nil {
		return nil, err
	}
	return &Prepared{fwd: fwd, cfg: c, receivers: recv, templates: tmpl, intervener: timeinterval.NewIntervener(ti), loc: loc, severities: c.Severities()}, nil
}

// Apply switches to a prepared alerting section. It fails only when the
// digest's schedule cannot be written to the database.
func (n *Notifier) Apply(p *Prepared) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cfg = p.cfg
	n.receivers = p.receivers
	n.templates = p.templates
	n.root = newRoute(p.cfg.Route, nil, "0")
	n.inhibit = newInhibitor(p.cfg.InhibitRules, n.alerts)
	n.intervener = p.intervener
	n.severities = p.severities
	n.resolve = p.cfg.ResolveTimeout()
	n.fwd.apply(p.fwd, p.cfg.AlertRelabelConfigs, p.cfg.ExternalLabels())
	now := n.now()
	if err := n.scheduleDigest(now, p.loc); err != nil {
		return err
	}
	n.groups = map[string]*aggGroup{}
	for fp, a := range n.alerts {
		n.route(fp, a, now)
	}
	return nil
}

// Send takes alerts from Prometheus' rules manager (the shape of its
// NotifyFunc): firing alerts with an end time in the future, resolved ones
// with one in the past. It does not block on delivery.
func (n *Notifier) Send(alerts ...*notifier.Alert) {
	as := make([]model.Alert, 0, len(alerts))
	for _, a := range alerts {
		as = append(as, fromPrometheus(a))
	}
	// As Prometheus: the rules' alerts also go to alerting.alertmanagers.
	n.fwd.enqueue(as)
	n.Post(as)
}

// Post takes alerts in Alertmanager's form (the v2 API). An alert without
// a start starts now; one without an end resolves after resolveTimeout
// unless it is posted again.
func (n *Notifier) Post(alerts []model.Alert) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	for _, a := range alerts {
		if len(a.Labels) == 0 {
			continue
		}
		if a.StartsAt.IsZero() {
			a.StartsAt = now
			if !a.EndsAt.IsZero() && a.EndsAt.Before(now) {
				a.StartsAt = a.EndsAt
			}
		}
		if a.EndsAt.IsZero() {
			a.EndsAt = now.Add(n.resolve)
		}
		a.Labels = n.withPriority(a.Labels)
		fp := a.Labels.Fingerprint()
		old := n.alerts[fp]
		na := merge(old, a, now)
		n.alerts[fp] = na
		if old == nil {
			n.inhibit.observe(fp, na.Labels)
		}
		n.route(fp, na, now)
		n.m.received.Inc()
	}
}

// withPriority returns ls with the priority label that routing reads,
// from its severity label through alerting.severity_map, unless it has
// one. A severity the map does not know routes as default_severity, with
// a warning once.
func (n *Notifier) withPriority(ls model.LabelSet) model.LabelSet {
	if p, ok := ls[config.PriorityLabel]; ok && n.severities.KeepsPriority(string(p)) {
		return ls
	}
	sev, _ := n.severities.Of(func(l string) (string, bool) { v, ok := ls[model.LabelName(l)]; return string(v), ok })
	p, ok := n.severities.Priority(sev)
	if !ok {
		n.warnOnce("severity:"+sev, "an alert's severity is not in alerting.severity_map; it routes as alerting.default_severity", "severity", sev, "default_severity", n.severities.Default)
		p = n.severities.Default
	}
	out := ls.Clone()
	out[config.PriorityLabel] = model.LabelValue(p)
	return out
}

// route puts an alert into the aggregation groups of its routes.
func (n *Notifier) route(fp model.Fingerprint, a *alert, now time.Time) {
	for _, r := range n.root.match(a.Labels) {
		gl := r.groupLabels(a.Labels)
		key := r.groupKey(gl)
		g := n.groups[key]
		if g == nil {
			g = &aggGroup{key: key, route: r, labels: gl, fps: map[model.Fingerprint]bool{}, next: now.Add(r.groupWait)}
			n.groups[key] = g
			if r.groupWait <= 0 {
				n.wakeRun()
			}
		}
		g.fps[fp] = true
	}
}

// Run calls Tick every TickInterval until ctx ends, and at once when a new
// group has group_wait 0s; the first tick at once resumes what the outbox
// held at the last stop. When ctx ends, the delivery in flight may finish
// and one last Tick dispatches what became due, both within DrainTimeout;
// a receiver that is slow or down is cut off then, and its message stays
// in the outbox (bbolt) for the next start.
func (n *Notifier) Run(ctx context.Context) error {
	// Deliveries run under their own context, which outlives ctx by the
	// drain.
	dctx, dcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer dcancel()
	fwdDone := make(chan struct{})
	go func() {
		defer close(fwdDone)
		n.fwd.run(ctx)
	}()
	defer func() { <-fwdDone }()
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		t := time.NewTicker(n.opts.TickInterval)
		defer t.Stop()
		for {
			n.tickLogged(dctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-n.wake:
				// A new group with group_wait 0s: flush it now
				// rather than up to a tick late.
			}
		}
	}()
	<-ctx.Done()
	drain := time.AfterFunc(n.opts.DrainTimeout, dcancel)
	defer drain.Stop()
	<-loopDone
	if dctx.Err() == nil {
		n.tickLogged(dctx) // the last dispatch
	}
	return nil
}

// wakeRun asks Run for a tick now; it never blocks (one pending wake is
// enough: the tick flushes every group that is due).
func (n *Notifier) wakeRun() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Notifier) tickLogged(ctx context.Context) {
	if err := n.Tick(ctx); err != nil {
		n.log.Error("notify tick", "err", err)
	}
}

// Tick does what is due at the clock's time: flushes groups, sends the
// digest, delivers and retries the outbox, forgets old state. What the
// flushes decide is made under the lock, in memory; what they write to the
// database is written after it, in one transaction.
func (n *Notifier) Tick(ctx context.Context) error {
	n.tickMu.Lock()
	defer n.tickMu.Unlock()
	now := n.now()
	var errs []error
	n.mu.Lock()
	keys := make([]string, 0, len(n.groups))
	for k, g := range n.groups {
		if !g.next.After(now) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var plans []*flushPlan
	for _, k := range keys {
		if p := n.flush(n.groups[k], now); p != nil {
			plans = append(plans, p)
		}
	}
	if err := n.maybeSendDigest(now); err != nil {
		errs = append(errs, err)
	}
	n.gc(now)
	n.mu.Unlock()
	if err := n.commit(plans, now); err != nil {
		errs = append(errs, err)
	}
	if err := n.deliver(ctx, now); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// muted reports whether the route's time intervals mute it at now.
func (n *Notifier) mutedByTime(r *route, now time.Time) bool {
	if len(r.muteTimeIntervals) > 0 {
		if m, _, err := n.intervener.Mutes(r.muteTimeIntervals, now); err == nil && m {
			return true
		}
	}
	if len(r.activeTimeIntervals) > 0 {
		if in, _, err := n.intervener.Mutes(r.activeTimeIntervals, now); err == nil && !in {
			return true
		}
	}
	return false
}

// flushPlan is what a flush of a group decided under the lock: the alerts
// to notify, for commit to compare with the notification log and write.
type flushPlan struct {
	key              string
	amKey            string // the group key of Alertmanager's payloads
	labels           model.LabelSet
	receiver         string
	ints             []*integration
	templates        *message.Templates
	repeatInterval   time.Duration
	digest           bool
	alerts           []message.Alert
	firing, resolved []string
}

// flush is one flush of a group (see the package doc), in memory: it
// returns what to write, or nil. Called with n.mu held.
func (n *Notifier) flush(g *aggGroup, now time.Time) *flushPlan {
	r := g.route
	g.next = now.Add(r.groupInterval)
	var (
		alerts           []message.Alert
		firing, resolved []string
		done             []model.Fingerprint
	)
	for fp := range g.fps {
		a := n.alerts[fp]
		if a == nil {
			delete(g.fps, fp)
			continue
		}
		if a.resolved(now) {
			done = append(done, fp)
		}
		if len(n.sil.mutes(fp, a.Labels, now)) > 0 || n.inhibit.inhibited(a.Labels, fp, n.alerts, now) {
			continue
		}
		ma := a.message(now)
		alerts = append(alerts, ma)
		if ma.Status == "firing" {
			firing = append(firing, ma.Fingerprint)
		} else {
			resolved = append(resolved, ma.Fingerprint)
		}
	}
	for _, fp := range done {
		delete(g.fps, fp)
	}
	if len(g.fps) == 0 {
		delete(n.groups, g.key)
	}
	if len(alerts) == 0 || n.mutedByTime(r, now) {
		return nil
	}
	message.SortAlerts(alerts)
	sort.Strings(firing)
	sort.Strings(resolved)
	p := &flushPlan{key: g.key, amKey: r.alertmanagerGroupKey(g.labels), labels: g.labels, receiver: r.receiver, templates: n.templates, repeatInterval: r.repeatInterval, digest: r.digest, alerts: alerts, firing: firing, resolved: resolved}
	if r.digest {
		return p
	}
	if r.receiver == "" {
		n.warnOnce("noreceiver:"+r.id, "alerts match a route without a receiver and are not sent; give them a severity in alerting.severity_map or a route", "group", g.key)
		return nil
	}
	ints, ok := n.receivers[r.receiver]
	if !ok {
		n.warnOnce("receiver:"+r.receiver, "alerts route to a receiver that is not defined; define it under alerting.receivers", "receiver", r.receiver, "group", g.key)
		return nil
	}
	p.ints = ints
	return p
}

// commit writes what the flushes of a tick decided: digest records, and
// for each group whose notification log says so, the messages to the
// outbox and the new log entry, all in one transaction. Most flushes
// change nothing: that is decided in a read transaction first, so that
// they cost no disk write.
func (n *Notifier) commit(plans []*flushPlan, now time.Time) error {
	var errs []error
	var send []*flushPlan
	for _, p := range plans {
		if p.digest {
			if err := n.recordDigest(p.alerts, now); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		send = append(send, p)
	}
	if len(send) == 0 {
		return errors.Join(errs...)
	}
	var update []*flushPlan
	err := n.db.View(func(tx *bolt.Tx) error {
		for _, p := range send {
			sendResolved := false
			for _, in := range p.ints {
				sendResolved = sendResolved || in.SendResolved()
			}
			e, err := readNflog(tx, p.key, p.receiver)
			if err != nil {
				return err
			}
			if needsUpdate(e, p.firing, p.resolved, sendResolved, p.repeatInterval, now) {
				update = append(update, p)
			}
		}
		return nil
	})
	if err != nil || len(update) == 0 {
		return errors.Join(append(errs, err)...)
	}
	type write struct {
		p       *flushPlan
		entries []*outboxEntry
	}
	var writes []write
	for _, p := range update {
		w, failed := write{p: p}, false
		for _, in := range p.ints {
			as := p.alerts
			if !in.SendResolved() {
				as = onlyFiring(p.alerts)
				if len(as) == 0 {
					continue
				}
			}
			m := n.newMessage(message.KindAlerts, p.receiver, p.amKey, p.labels, as, in.name, now)
			t := p.templates
			if in.templates != nil {
				t = in.templates
			}
			if err := t.Render(m); err != nil {
				errs = append(errs, err)
				failed = true
				break
			}
			w.entries = append(w.entries, &outboxEntry{Integration: in.name, Receiver: p.receiver, GroupKey: p.key, CreatedAt: now, NextAttempt: now, Message: m})
		}
		if !failed {
			writes = append(writes, w)
		}
	}
	err = n.db.Update(func(tx *bolt.Tx) error {
		for _, w := range writes {
			if err := enqueue(tx, w.entries...); err != nil {
				return fmt.Errorf("write outbox: %w", err)
			}
			if err := writeNflog(tx, w.p.key, w.p.receiver, &nflogEntry{Firing: w.p.firing, Resolved: w.p.resolved, Timestamp: now}); err != nil {
				return err
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

func onlyFiring(as []message.Alert) []message.Alert {
	var out []message.Alert
	for _, a := range as {
		if a.Status == "firing" {
			out = append(out, a)
		}
	}
	return out
}

// newMessage builds a message with Alertmanager's common labels and
// annotations and a dedup key unique to this notification.
func (n *Notifier) newMessage(kind, receiver, groupKey string, gl model.LabelSet, as []message.Alert, integ string, now time.Time) *message.Message {
	m := &message.Message{
		Kind: kind, Receiver: receiver, GroupKey: groupKey, GroupLabels: toMap(gl),
		ExternalURL: n.opts.ExternalURL, Alerts: as, At: now, Status: "resolved",
	}
	for i, a := range as {
		if a.Status == "firing" {
			m.Status = "firing"
		}
		if i == 0 {
			m.CommonLabels, m.CommonAnnotations = cloneMap(a.Labels), cloneMap(a.Annotations)
			continue
		}
		intersect(m.CommonLabels, a.Labels)
		intersect(m.CommonAnnotations, a.Annotations)
	}
	if m.CommonLabels == nil {
		m.CommonLabels, m.CommonAnnotations = map[string]string{}, map[string]string{}
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%s\xff%s\xff%d", groupKey, integ, now.UnixNano()))
	m.DedupKey = hex.EncodeToString(h[:12])
	return m
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func intersect(dst, m map[string]string) {
	for k, v := range dst {
		if m[k] != v {
			delete(dst, k)
		}
	}
}

func (n *Notifier) warnOnce(key, msg string, args ...any) {
	if n.warned[key] {
		return
	}
	n.warned[key] = true
	n.log.Warn(msg, args...)
}

// gc forgets alerts that resolved a while ago and belong to no group, and
// old silences.
func (n *Notifier) gc(now time.Time) {
	inGroup := map[model.Fingerprint]bool{}
	for _, g := range n.groups {
		for fp := range g.fps {
			inGroup[fp] = true
		}
	}
	for fp, a := range n.alerts {
		if !inGroup[fp] && a.resolved(now) && now.Sub(a.EndsAt) > resolveTimeout {
			delete(n.alerts, fp)
			n.inhibit.forget(fp, a.Labels)
			n.sil.forget(fp)
		}
	}
	if err := n.sil.gc(now); err != nil {
		n.log.Warn("cannot delete old silences", "err", err)
	}
	if now.Sub(n.lastNflogGC) >= time.Hour {
		n.lastNflogGC = now
		if err := gcNflog(n.db, now.Add(-nflogRetention)); err != nil {
			n.log.Warn("cannot delete old notification log entries", "err", err)
		}
	}
}

// integration returns the integration named name (receiver/type/index).
func (n *Notifier) integration(name string) *integration {
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, ints := range n.receivers {
		for _, in := range ints {
			if in.name == name {
				return in
			}
		}
	}
	return nil
}

// deliver sends what is due in the outbox, in order per queue.
func (n *Notifier) deliver(ctx context.Context, now time.Time) error {
	n.deliverMu.Lock()
	defer n.deliverMu.Unlock()
	entries, err := pending(n.db)
	if err != nil {
		return err
	}
	n.mu.RLock()
	ob := n.cfg.Outbox
	n.mu.RUnlock()
	blocked := map[string]bool{}
	queued := map[string]float64{}
	for _, e := range entries {
		queued[e.Receiver]++
		q := e.queue()
		if blocked[q] || e.NextAttempt.After(now) || ctx.Err() != nil {
			blocked[q] = true
			continue
		}
		in := n.integration(e.Integration)
		var sendErr error
		if in == nil {
			sendErr = fmt.Errorf("integration %s is no longer configured", e.Integration)
		} else {
			sendErr = in.Notify(ctx, e.Message)
			if sendErr == nil && n.afterSend != nil {
				if err := n.afterSend(e); err != nil {
					return err
				}
			}
		}
		e.Attempts++
		d := Delivery{At: now, Receiver: e.Receiver, Integration: e.Integration, GroupKey: e.GroupKey, Kind: e.Message.Kind, Title: e.Message.Title, DedupKey: e.Message.DedupKey, Attempts: e.Attempts}
		switch {
		case sendErr == nil:
			d.Result = "sent"
			n.m.total.WithLabelValues(e.Receiver, "sent").Inc()
			queued[e.Receiver]--
		case in == nil || deliver.IsPermanent(sendErr) || now.Sub(e.CreatedAt) >= time.Duration(ob.GiveUpAfter):
			d.Result, d.Error = "failed", sendErr.Error()
			n.m.total.WithLabelValues(e.Receiver, "failed").Inc()
			queued[e.Receiver]--
			n.log.Error("notification given up", "receiver", e.Receiver, "integration", e.Integration, "attempts", e.Attempts, "age", now.Sub(e.CreatedAt).String(), "err", sendErr)
		default:
			e.LastError = sendErr.Error()
			e.NextAttempt = now.Add(backoff(e.Attempts, time.Duration(ob.MinBackoff), time.Duration(ob.MaxBackoff)))
			n.m.total.WithLabelValues(e.Receiver, "retried").Inc()
			blocked[q] = true
			n.log.Warn("notification not accepted; will retry", "receiver", e.Receiver, "integration", e.Integration, "attempts", e.Attempts, "next", e.NextAttempt, "err", sendErr)
		}
		err := n.db.Update(func(tx *bolt.Tx) error {
			if d.Result == "" {
				return putEntry(tx, e)
			}
			if err := tx.Bucket(bucketOutbox).Delete(seqKey(e.Seq)); err != nil {
				return err
			}
			return appendHistory(tx, d)
		})
		if err != nil {
			return fmt.Errorf("update outbox: %w", err)
		}
	}
	n.m.setQueued(queued)
	return nil
}

func putEntry(tx *bolt.Tx, e *outboxEntry) error {
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketOutbox).Put(seqKey(e.Seq), v)
}

// backoff doubles from min with each attempt, up to max.
func backoff(attempts int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < attempts && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}
