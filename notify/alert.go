package notify

import (
	"maps"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"

	"github.com/aiserve/appliance/notify/message"
)

// resolveTimeout is Alertmanager's resolve_timeout: an alert that comes
// without an end time is taken as resolved if it is not sent again within
// it.
const resolveTimeout = 5 * time.Minute

// alert is an alert as the notifier keeps it.
type alert struct {
	model.Alert
	UpdatedAt time.Time
}

func (a *alert) resolved(now time.Time) bool { return !a.EndsAt.IsZero() && !a.EndsAt.After(now) }

func (a *alert) message(now time.Time) message.Alert {
	// As Alertmanager's dispatcher: a firing alert goes out without an
	// end (the zero time), since the end the sender set is only when it
	// would resolve if not sent again.
	st, ends := "firing", time.Time{}
	if a.resolved(now) {
		st, ends = "resolved", a.EndsAt
	}
	return message.Alert{
		Status: st, Labels: toMap(a.Labels), Annotations: toMap(a.Annotations),
		StartsAt: a.StartsAt, EndsAt: ends, GeneratorURL: a.GeneratorURL,
		Fingerprint: a.Fingerprint().String(),
	}
}

func toMap(ls model.LabelSet) map[string]string {
	m := make(map[string]string, len(ls))
	for k, v := range ls {
		m[string(k)] = string(v)
	}
	return m
}

// fromPrometheus converts an alert of Prometheus' rules manager.
func fromPrometheus(pa *notifier.Alert) model.Alert {
	a := model.Alert{
		Labels: model.LabelSet{}, Annotations: model.LabelSet{},
		StartsAt: pa.StartsAt, EndsAt: pa.EndsAt, GeneratorURL: pa.GeneratorURL,
	}
	pa.Labels.Range(func(l labels.Label) { a.Labels[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
	pa.Annotations.Range(func(l labels.Label) { a.Annotations[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
	return a
}

// merge folds an update of the same alert into the stored one, as
// Alertmanager's Alert.Merge: the earliest start wins, and the end of the
// newer update, unless the stored one already resolved later.
func merge(old *alert, nw model.Alert, now time.Time) *alert {
	res := &alert{Alert: nw, UpdatedAt: now}
	res.Labels = maps.Clone(nw.Labels)
	if old == nil {
		return res
	}
	// A new firing episode after a resolved one starts afresh.
	if old.resolved(now) && !res.resolved(now) {
		return res
	}
	if !old.StartsAt.IsZero() && old.StartsAt.Before(nw.StartsAt) {
		res.StartsAt = old.StartsAt
	}
	return res
}
