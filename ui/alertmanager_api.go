package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/common/model"

	"github.com/aiserve/appliance/notify"
)

// NotifyRetriever is what the Alertmanager v2 API reads and changes of the
// notify part; *notify.Notifier implements it. Alertmanager's semantics
// (filters, defaults, validation, order) are the notifier's; this file
// only maps them to HTTP. Methods are called from concurrent requests and
// must be safe for that; the slices they return are the caller's.
type NotifyRetriever interface {
	Alerts(notify.AlertFilter) []notify.AlertStatus
	AlertGroups(amlabels.Matchers) []notify.AlertGroup
	PostAlerts([]model.Alert) error
	Silences(amlabels.Matchers) []notify.SilenceStatus
	Silence(id string) (notify.SilenceStatus, bool)
	SetSilence(notify.Silence) (string, error)
	ExpireSilence(id string) error
	Status() notify.Status
	Receivers() []string
	// History returns the last deliveries, newest first, at most limit.
	History(limit int) ([]notify.Delivery, error)
}

// maxAlertmanagerBody bounds the body of a POST to the v2 API
// (Alertmanager has no limit; a vmalert batch of a few thousand alerts is
// well below it).
const maxAlertmanagerBody = 8 << 20

// alertmanagerHandler returns the subset of Alertmanager's v2 API that
// amtool, Grafana and Prometheus use, to mount at "/api/v2/":
//
//	GET, POST   /api/v2/alerts           alerts as Alertmanager lists them; post external alerts
//	GET         /api/v2/alerts/groups    the aggregation groups (Grafana's Alertmanager view)
//	GET, POST   /api/v2/silences         list (filter=matcher...), create or update
//	GET, DELETE /api/v2/silence/{id}     one silence; expire it
//	GET         /api/v2/status           cluster "disabled", version, config (secrets redacted)
//	GET         /api/v2/receivers        the receivers' names
//	GET         /api/v2/notifications    the appliance's delivery history (?limit=)
//
// Errors are a JSON string with status 400 or 404, as Alertmanager's.
func alertmanagerHandler(n NotifyRetriever) http.Handler {
	a := amAPI{n: n}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v2/alerts", a.getAlerts)
	mux.HandleFunc("GET /api/v2/alerts/groups", a.getAlertGroups)
	mux.HandleFunc("POST /api/v2/alerts", a.postAlerts)
	mux.HandleFunc("GET /api/v2/silences", a.getSilences)
	mux.HandleFunc("POST /api/v2/silences", a.postSilence)
	mux.HandleFunc("GET /api/v2/silence/{id}", a.getSilence)
	mux.HandleFunc("DELETE /api/v2/silence/{id}", a.deleteSilence)
	mux.HandleFunc("GET /api/v2/status", a.getStatus)
	mux.HandleFunc("GET /api/v2/receivers", a.getReceivers)
	mux.HandleFunc("GET /api/v2/notifications", a.getNotifications)
	return mux
}

type amAPI struct{ n NotifyRetriever }

func amWriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func amError(w http.ResponseWriter, code int, format string, args ...any) {
	amWriteJSON(w, code, fmt.Sprintf(format, args...))
}

// amFilters parses the filter query parameters (matchers).
func amFilters(r *http.Request) (amlabels.Matchers, error) {
	var ms amlabels.Matchers
	for _, f := range r.URL.Query()["filter"] {
		m, err := amlabels.ParseMatcher(f)
		if err != nil {
			return nil, fmt.Errorf("bad matcher %q: %w", f, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func boolParam(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	return strconv.ParseBool(v)
}

// The JSON shapes below are Alertmanager's (field names and order).

type amReceiver struct {
	Name string `json:"name"`
}

type amAlertStatus struct {
	State       string   `json:"state"`
	SilencedBy  []string `json:"silencedBy"`
	InhibitedBy []string `json:"inhibitedBy"`
	MutedBy     []string `json:"mutedBy"`
}

type gettableAlert struct {
	Labels       model.LabelSet `json:"labels"`
	Annotations  model.LabelSet `json:"annotations"`
	StartsAt     time.Time      `json:"startsAt"`
	EndsAt       time.Time      `json:"endsAt"`
	UpdatedAt    time.Time      `json:"updatedAt"`
	GeneratorURL string         `json:"generatorURL,omitempty"`
	Fingerprint  string         `json:"fingerprint"`
	Receivers    []amReceiver   `json:"receivers"`
	Status       amAlertStatus  `json:"status"`
}

func toGettableAlert(a notify.AlertStatus) gettableAlert {
	ga := gettableAlert{
		Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt, EndsAt: a.EndsAt, UpdatedAt: a.UpdatedAt,
		GeneratorURL: a.GeneratorURL, Fingerprint: a.Fingerprint.String(), Receivers: []amReceiver{},
		Status: amAlertStatus{State: a.State(), SilencedBy: a.SilencedBy, InhibitedBy: a.InhibitedBy, MutedBy: []string{}},
	}
	for _, name := range a.Receivers {
		ga.Receivers = append(ga.Receivers, amReceiver{Name: name})
	}
	return ga
}

func (a amAPI) getAlerts(w http.ResponseWriter, r *http.Request) {
	ms, err := amFilters(r)
	if err != nil {
		amError(w, http.StatusBadRequest, "%v", err)
		return
	}
	f := notify.AlertFilter{Matchers: ms}
	for _, p := range []struct {
		name string
		dst  *bool
	}{{"active", &f.Active}, {"silenced", &f.Silenced}, {"inhibited", &f.Inhibited}} {
		if *p.dst, err = boolParam(r, p.name, true); err != nil {
			amError(w, http.StatusBadRequest, "%s: %v", p.name, err)
			return
		}
	}
	if s := r.URL.Query().Get("receiver"); s != "" {
		if f.Receiver, err = regexp.Compile("^(?:" + s + ")$"); err != nil {
			amError(w, http.StatusBadRequest, "receiver: %v", err)
			return
		}
	}
	out := []gettableAlert{}
	for _, st := range a.n.Alerts(f) {
		out = append(out, toGettableAlert(st))
	}
	amWriteJSON(w, http.StatusOK, out)
}

type alertGroup struct {
	Labels   model.LabelSet  `json:"labels"`
	Receiver amReceiver      `json:"receiver"`
	Alerts   []gettableAlert `json:"alerts"`
}

func (a amAPI) getAlertGroups(w http.ResponseWriter, r *http.Request) {
	ms, err := amFilters(r)
	if err != nil {
		amError(w, http.StatusBadRequest, "%v", err)
		return
	}
	out := []alertGroup{}
	for _, g := range a.n.AlertGroups(ms) {
		ag := alertGroup{Labels: g.Labels, Receiver: amReceiver{Name: g.Receiver}, Alerts: []gettableAlert{}}
		for _, st := range g.Alerts {
			ag.Alerts = append(ag.Alerts, toGettableAlert(st))
		}
		out = append(out, ag)
	}
	amWriteJSON(w, http.StatusOK, out)
}

type postableAlert struct {
	Labels       model.LabelSet `json:"labels"`
	Annotations  model.LabelSet `json:"annotations"`
	StartsAt     time.Time      `json:"startsAt"`
	EndsAt       time.Time      `json:"endsAt"`
	GeneratorURL string         `json:"generatorURL"`
}

func (a amAPI) postAlerts(w http.ResponseWriter, r *http.Request) {
	var in []postableAlert
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAlertmanagerBody)).Decode(&in); err != nil {
		amError(w, http.StatusBadRequest, "cannot parse the alerts: %v", err)
		return
	}
	as := make([]model.Alert, 0, len(in))
	for _, p := range in {
		as = append(as, model.Alert{Labels: p.Labels, Annotations: p.Annotations, StartsAt: p.StartsAt, EndsAt: p.EndsAt, GeneratorURL: p.GeneratorURL})
	}
	if err := a.n.PostAlerts(as); err != nil {
		amError(w, http.StatusBadRequest, "%v", err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

type gettableSilence struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
	UpdatedAt time.Time        `json:"updatedAt"`
	Matchers  []notify.Matcher `json:"matchers"`
	StartsAt  time.Time        `json:"startsAt"`
	EndsAt    time.Time        `json:"endsAt"`
	CreatedBy string           `json:"createdBy"`
	Comment   string           `json:"comment"`
}

func toGettableSilence(s notify.SilenceStatus) gettableSilence {
	g := gettableSilence{ID: s.ID, UpdatedAt: s.UpdatedAt, StartsAt: s.StartsAt, EndsAt: s.EndsAt, CreatedBy: s.CreatedBy, Comment: s.Comment}
	g.Status.State = s.State
	for _, m := range s.Matchers {
		eq := m.IsEqual == nil || *m.IsEqual
		m.IsEqual = &eq
		g.Matchers = append(g.Matchers, m)
	}
	return g
}

func (a amAPI) getSilences(w http.ResponseWriter, r *http.Request) {
	fs, err := amFilters(r)
	if err != nil {
		amError(w, http.StatusBadRequest, "%v", err)
		return
	}
	out := []gettableSilence{}
	for _, s := range a.n.Silences(fs) {
		out = append(out, toGettableSilence(s))
	}
	amWriteJSON(w, http.StatusOK, out)
}

// silenceError answers an error of a silence operation: 404 for an unknown
// silence, 400 for an invalid one, else 500.
func silenceError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, notify.ErrSilenceNotFound):
		amError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, notify.ErrSilenceInvalid):
		amError(w, http.StatusBadRequest, "%v", err)
	default:
		amError(w, http.StatusInternalServerError, "%v", err)
	}
}

func (a amAPI) postSilence(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAlertmanagerBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			amError(w, http.StatusRequestEntityTooLarge, "the silence is over %d bytes", tooLarge.Limit)
			return
		}
		amError(w, http.StatusBadRequest, "cannot read the silence: %v", err)
		return
	}
	var s notify.Silence
	if err := json.Unmarshal(body, &s); err != nil {
		amError(w, http.StatusBadRequest, "cannot parse the silence: %v", err)
		return
	}
	// Alertmanager's API schema requires the createdBy key (an empty
	// value passes) and answers a body without it 422.
	var required struct {
		CreatedBy *string `json:"createdBy"`
	}
	if json.Unmarshal(body, &required) == nil && required.CreatedBy == nil {
		amError(w, http.StatusUnprocessableEntity, "createdBy in body is required")
		return
	}
	id, err := a.n.SetSilence(s)
	if err != nil {
		silenceError(w, err)
		return
	}
	amWriteJSON(w, http.StatusOK, map[string]string{"silenceID": id})
}

func (a amAPI) getSilence(w http.ResponseWriter, r *http.Request) {
	s, ok := a.n.Silence(r.PathValue("id"))
	if !ok {
		amError(w, http.StatusNotFound, "silence %s not found", r.PathValue("id"))
		return
	}
	amWriteJSON(w, http.StatusOK, toGettableSilence(s))
}

func (a amAPI) deleteSilence(w http.ResponseWriter, r *http.Request) {
	if err := a.n.ExpireSilence(r.PathValue("id")); err != nil {
		silenceError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a amAPI) getStatus(w http.ResponseWriter, _ *http.Request) {
	st := a.n.Status()
	amWriteJSON(w, http.StatusOK, map[string]any{
		"cluster": map[string]any{"status": "disabled", "peers": []any{}},
		"versionInfo": map[string]string{
			"version": st.Version, "revision": "", "branch": "", "buildUser": "", "buildDate": "", "goVersion": runtime.Version(),
		},
		"config": map[string]string{"original": st.Config},
		"uptime": st.Started.UTC(),
	})
}

func (a amAPI) getReceivers(w http.ResponseWriter, _ *http.Request) {
	out := []amReceiver{}
	for _, name := range a.n.Receivers() {
		out = append(out, amReceiver{Name: name})
	}
	amWriteJSON(w, http.StatusOK, out)
}

// defaultHistoryLimit is how many deliveries /api/v2/notifications lists
// without ?limit (the notifier keeps the last 1000).
const defaultHistoryLimit = 100

func (a amAPI) getNotifications(w http.ResponseWriter, r *http.Request) {
	limit := defaultHistoryLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		l, err := strconv.Atoi(s)
		if err != nil || l <= 0 {
			amError(w, http.StatusBadRequest, "limit %q: want a positive number", s)
			return
		}
		limit = l
	}
	h, err := a.n.History(limit)
	if err != nil {
		amError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if h == nil {
		h = []notify.Delivery{}
	}
	amWriteJSON(w, http.StatusOK, h)
}
