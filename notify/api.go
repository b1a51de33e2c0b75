package notify

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/common/model"
)

// What the HTTP layer reads and changes of the notifier. Package ui serves
// Alertmanager's v2 API (/api/v2) over these methods, through an interface
// of its own (ui.NotifyRetriever); the routes, query parameters, status
// codes and JSON are ui's. Alertmanager's semantics stay here: which
// alerts a filter selects, which silences a filter matches, the defaults
// and the validation of a posted alert, the order lists come in.

// AlertFilter selects alerts as the parameters of Alertmanager's
// GET /api/v2/alerts do.
type AlertFilter struct {
	// Matchers must all match the alert's labels.
	Matchers amlabels.Matchers
	// Receiver, when set, must match the name of one of the alert's
	// receivers (the caller anchors it).
	Receiver *regexp.Regexp
	// Active, Silenced and Inhibited keep alerts in those states.
	Active, Silenced, Inhibited bool
}

// AlertStatus is an alert with what the notifier decided about it at the
// time it was read.
type AlertStatus struct {
	Fingerprint  model.Fingerprint
	Labels       model.LabelSet
	Annotations  model.LabelSet
	StartsAt     time.Time
	EndsAt       time.Time
	UpdatedAt    time.Time
	GeneratorURL string
	// Receivers names the receivers of the routes the alert matches, in
	// route order; "digest" for a digest route.
	Receivers []string
	// SilencedBy lists the active silences that mute it, InhibitedBy the
	// alerts that inhibit it (fingerprints); both sorted, never nil.
	SilencedBy  []string
	InhibitedBy []string
}

// State is Alertmanager's state of the alert: "suppressed" when silenced
// or inhibited, else "active".
func (a AlertStatus) State() string {
	if len(a.SilencedBy) > 0 || len(a.InhibitedBy) > 0 {
		return "suppressed"
	}
	return "active"
}

// AlertGroup is an aggregation group and its unresolved alerts.
type AlertGroup struct {
	Labels   model.LabelSet
	Receiver string // "digest" for a digest route
	Alerts   []AlertStatus
}

// SilenceStatus is a silence with its state at the time it was read.
type SilenceStatus struct {
	Silence
	State string // SilenceActive, SilencePending or SilenceExpired
}

// Status is what Alertmanager's /api/v2/status reports.
type Status struct {
	// Config is the running alerting config as an Alertmanager
	// configuration (receivers by name only, so no secrets).
	Config  string
	Version string
	Started time.Time
}

// Alerts returns the unresolved alerts that f selects, ordered by
// fingerprint (as a string).
func (n *Notifier) Alerts(f AlertFilter) []AlertStatus {
	n.mu.RLock()
	now := n.now()
	out := []AlertStatus{}
	for fp, a := range n.alerts {
		if a.resolved(now) || !f.Matchers.Matches(a.Labels) {
			continue
		}
		st := n.alertStatus(fp, a, now)
		matched := f.Receiver == nil
		for _, name := range st.Receivers {
			matched = matched || f.Receiver.MatchString(name)
		}
		silenced, inhibited := len(st.SilencedBy) > 0, len(st.InhibitedBy) > 0
		if !matched || (!f.Active && !silenced && !inhibited) || (!f.Silenced && silenced) || (!f.Inhibited && inhibited) {
			continue
		}
		out = append(out, st)
	}
	n.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Fingerprint.String() < out[j].Fingerprint.String() })
	return out
}

// alertStatus returns an alert with its receivers, silences and
// inhibitions; called with n.mu held (for reading is enough).
func (n *Notifier) alertStatus(fp model.Fingerprint, a *alert, now time.Time) AlertStatus {
	st := AlertStatus{
		Fingerprint: fp, Labels: a.Labels, Annotations: a.Annotations,
		StartsAt: a.StartsAt, EndsAt: a.EndsAt, UpdatedAt: a.UpdatedAt, GeneratorURL: a.GeneratorURL,
		Receivers:   []string{},
		SilencedBy:  n.sil.mutes(fp, a.Labels, now),
		InhibitedBy: n.inhibit.inhibitedBy(a.Labels, fp, n.alerts, now),
	}
	if st.SilencedBy == nil {
		st.SilencedBy = []string{}
	}
	if st.InhibitedBy == nil {
		st.InhibitedBy = []string{}
	}
	for _, rt := range n.root.match(a.Labels) {
		if name := receiverName(rt); name != "" {
			st.Receivers = append(st.Receivers, name)
		}
	}
	return st
}

// receiverName is the receiver named for a route: "digest" for a digest
// route.
func receiverName(r *route) string {
	if r.digest {
		return "digest"
	}
	return r.receiver
}

// AlertGroups returns the aggregation groups that have unresolved alerts
// matching ms, ordered by their labels, each group's alerts by
// fingerprint.
func (n *Notifier) AlertGroups(ms amlabels.Matchers) []AlertGroup {
	n.mu.RLock()
	now := n.now()
	out := []AlertGroup{}
	for _, g := range n.groups {
		ag := AlertGroup{Labels: g.labels, Receiver: receiverName(g.route), Alerts: []AlertStatus{}}
		for fp := range g.fps {
			if a := n.alerts[fp]; a != nil && !a.resolved(now) && ms.Matches(a.Labels) {
				ag.Alerts = append(ag.Alerts, n.alertStatus(fp, a, now))
			}
		}
		if len(ag.Alerts) > 0 {
			sort.Slice(ag.Alerts, func(i, j int) bool {
				return ag.Alerts[i].Fingerprint.String() < ag.Alerts[j].Fingerprint.String()
			})
			out = append(out, ag)
		}
	}
	n.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Labels.String() < out[j].Labels.String() })
	return out
}

// PostAlerts takes alerts from outside (an external Prometheus, vmalert)
// as Alertmanager's POST /api/v2/alerts does: a missing start is now (or
// the end, when that is in the past), a missing end is resolve_timeout
// from now, then each alert is validated. The valid ones are posted; the
// error, if any, names the others by their index ("alert 2: ...; alert
// 5: ...").
func (n *Notifier) PostAlerts(in []model.Alert) error {
	as := make([]model.Alert, 0, len(in))
	var errs []string
	now := n.now()
	n.mu.RLock()
	resolve := n.resolve
	n.mu.RUnlock()
	for i, a := range in {
		// Alertmanager's defaults, before its validation.
		if a.StartsAt.IsZero() {
			a.StartsAt = now
			if !a.EndsAt.IsZero() && a.EndsAt.Before(now) {
				a.StartsAt = a.EndsAt
			}
		}
		if a.EndsAt.IsZero() {
			a.EndsAt = now.Add(resolve)
		}
		if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Sprintf("alert %d: %v", i, err))
			continue
		}
		as = append(as, a)
	}
	n.Post(as)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// silenceMatchesFilter is Alertmanager's filter for silences: every filter
// matcher must find a matcher of the silence on the same label whose value
// it matches.
func silenceMatchesFilter(s Silence, fs amlabels.Matchers) bool {
	for _, f := range fs {
		found := false
		for _, m := range s.Matchers {
			if m.Name == f.Name && f.Matches(m.Value) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Silences returns the silences that the filter matchers fs match
// (Alertmanager's filter: each matcher must match the value of a matcher
// of the silence on the same label), active first, then pending, then
// expired, newest first within each.
func (n *Notifier) Silences(fs amlabels.Matchers) []SilenceStatus {
	now := n.now()
	list := n.sil.list()
	out := []SilenceStatus{}
	for _, s := range list {
		if silenceMatchesFilter(s, fs) {
			out = append(out, SilenceStatus{Silence: s, State: s.State(now)})
		}
	}
	rank := map[string]int{SilenceActive: 0, SilencePending: 1, SilenceExpired: 2}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].State] < rank[out[j].State] })
	return out
}

// Silence returns the silence with this ID; ok is false when there is
// none.
func (n *Notifier) Silence(id string) (s SilenceStatus, ok bool) {
	sil, ok := n.sil.get(id)
	if !ok {
		return SilenceStatus{}, false
	}
	return SilenceStatus{Silence: sil, State: sil.State(n.now())}, true
}

// SetSilence creates a silence, or updates the one with s.ID, and returns
// its ID; see silences.set for when an update makes a new ID. Errors wrap
// ErrSilenceInvalid or ErrSilenceNotFound when the silence is at fault.
func (n *Notifier) SetSilence(s Silence) (string, error) {
	return n.sil.set(s, n.now())
}

// ExpireSilence ends a silence now.
func (n *Notifier) ExpireSilence(id string) error {
	return n.sil.expire(id, n.now())
}

// Status returns the running alerting config as Alertmanager's, the
// version and when the notifier started.
func (n *Notifier) Status() Status {
	n.mu.RLock()
	cfg := alertmanagerYAML(n.cfg)
	n.mu.RUnlock()
	return Status{Config: cfg, Version: n.opts.Version, Started: n.started}
}

// Receivers returns the names of the configured receivers, in config
// order.
func (n *Notifier) Receivers() []string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := []string{}
	for _, rc := range n.cfg.Receivers {
		out = append(out, rc.Name)
	}
	return out
}
