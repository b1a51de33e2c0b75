package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/common/model"
)

// maxAPIBody bounds the body of a POST to the v2 API (Alertmanager has no
// limit; a vmalert batch of a few thousand alerts is well below it).
const maxAPIBody = 8 << 20

// Handler returns the subset of Alertmanager's v2 API that amtool, Grafana
// and Prometheus use, to mount at "/api/v2/":
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
func (n *Notifier) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v2/alerts", n.getAlerts)
	mux.HandleFunc("GET /api/v2/alerts/groups", n.getAlertGroups)
	mux.HandleFunc("POST /api/v2/alerts", n.postAlerts)
	mux.HandleFunc("GET /api/v2/silences", n.getSilences)
	mux.HandleFunc("POST /api/v2/silences", n.postSilence)
	mux.HandleFunc("GET /api/v2/silence/{id}", n.getSilence)
	mux.HandleFunc("DELETE /api/v2/silence/{id}", n.deleteSilence)
	mux.HandleFunc("GET /api/v2/status", n.getStatus)
	mux.HandleFunc("GET /api/v2/receivers", n.getReceivers)
	mux.HandleFunc("GET /api/v2/notifications", n.getNotifications)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, fmt.Sprintf(format, args...))
}

// filters parses the filter query parameters (matchers).
func filters(r *http.Request) (amlabels.Matchers, error) {
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

type apiReceiver struct {
	Name string `json:"name"`
}

type apiAlertStatus struct {
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
	Receivers    []apiReceiver  `json:"receivers"`
	Status       apiAlertStatus `json:"status"`
}

func (n *Notifier) getAlerts(w http.ResponseWriter, r *http.Request) {
	ms, err := filters(r)
	if err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var show [3]bool
	for i, p := range []string{"active", "silenced", "inhibited"} {
		if show[i], err = boolParam(r, p, true); err != nil {
			apiError(w, http.StatusBadRequest, "%s: %v", p, err)
			return
		}
	}
	var recvRE *regexp.Regexp
	if s := r.URL.Query().Get("receiver"); s != "" {
		if recvRE, err = regexp.Compile("^(?:" + s + ")$"); err != nil {
			apiError(w, http.StatusBadRequest, "receiver: %v", err)
			return
		}
	}
	n.mu.Lock()
	now := n.now()
	out := []gettableAlert{}
	for fp, a := range n.alerts {
		if a.resolved(now) || !ms.Matches(a.Labels) {
			continue
		}
		ga := n.gettableAlert(fp, a, now)
		matched := recvRE == nil
		for _, rc := range ga.Receivers {
			matched = matched || recvRE.MatchString(rc.Name)
		}
		silenced, inhibited := len(ga.Status.SilencedBy) > 0, len(ga.Status.InhibitedBy) > 0
		if !matched || (!show[0] && !silenced && !inhibited) || (!show[1] && silenced) || (!show[2] && inhibited) {
			continue
		}
		out = append(out, ga)
	}
	n.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Fingerprint < out[j].Fingerprint })
	writeJSON(w, http.StatusOK, out)
}

// gettableAlert returns an alert in the API's form; called with n.mu held.
func (n *Notifier) gettableAlert(fp model.Fingerprint, a *alert, now time.Time) gettableAlert {
	ga := gettableAlert{
		Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt, EndsAt: a.EndsAt, UpdatedAt: a.UpdatedAt,
		GeneratorURL: a.GeneratorURL, Fingerprint: fp.String(), Receivers: []apiReceiver{},
		Status: apiAlertStatus{State: "active", SilencedBy: n.sil.mutes(a.Labels, now), InhibitedBy: n.inhibit.inhibitedBy(a.Labels, fp, n.alerts, now), MutedBy: []string{}},
	}
	if ga.Status.SilencedBy == nil {
		ga.Status.SilencedBy = []string{}
	}
	if ga.Status.InhibitedBy == nil {
		ga.Status.InhibitedBy = []string{}
	}
	for _, rt := range n.root.match(a.Labels) {
		if name := receiverName(rt); name != "" {
			ga.Receivers = append(ga.Receivers, apiReceiver{Name: name})
		}
	}
	if len(ga.Status.SilencedBy) > 0 || len(ga.Status.InhibitedBy) > 0 {
		ga.Status.State = "suppressed"
	}
	return ga
}

// receiverName is the receiver the API names for a route: "digest" for a
// digest route.
func receiverName(r *route) string {
	if r.digest {
		return "digest"
	}
	return r.receiver
}

type alertGroup struct {
	Labels   model.LabelSet  `json:"labels"`
	Receiver apiReceiver     `json:"receiver"`
	Alerts   []gettableAlert `json:"alerts"`
}

func (n *Notifier) getAlertGroups(w http.ResponseWriter, r *http.Request) {
	ms, err := filters(r)
	if err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	n.mu.Lock()
	now := n.now()
	out := []alertGroup{}
	for _, g := range n.groups {
		ag := alertGroup{Labels: g.labels, Receiver: apiReceiver{Name: receiverName(g.route)}, Alerts: []gettableAlert{}}
		for fp := range g.fps {
			if a := n.alerts[fp]; a != nil && !a.resolved(now) && ms.Matches(a.Labels) {
				ag.Alerts = append(ag.Alerts, n.gettableAlert(fp, a, now))
			}
		}
		if len(ag.Alerts) > 0 {
			sort.Slice(ag.Alerts, func(i, j int) bool { return ag.Alerts[i].Fingerprint < ag.Alerts[j].Fingerprint })
			out = append(out, ag)
		}
	}
	n.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Labels.String() < out[j].Labels.String() })
	writeJSON(w, http.StatusOK, out)
}

type postableAlert struct {
	Labels       model.LabelSet `json:"labels"`
	Annotations  model.LabelSet `json:"annotations"`
	StartsAt     time.Time      `json:"startsAt"`
	EndsAt       time.Time      `json:"endsAt"`
	GeneratorURL string         `json:"generatorURL"`
}

func (n *Notifier) postAlerts(w http.ResponseWriter, r *http.Request) {
	var in []postableAlert
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAPIBody)).Decode(&in); err != nil {
		apiError(w, http.StatusBadRequest, "cannot parse the alerts: %v", err)
		return
	}
	as := make([]model.Alert, 0, len(in))
	var errs []string
	now := n.now()
	for i, p := range in {
		a := model.Alert{Labels: p.Labels, Annotations: p.Annotations, StartsAt: p.StartsAt, EndsAt: p.EndsAt, GeneratorURL: p.GeneratorURL}
		// Alertmanager's defaults, before its validation: no start is
		// now, no end is resolve_timeout from now.
		if a.StartsAt.IsZero() {
			a.StartsAt = now
			if !a.EndsAt.IsZero() && a.EndsAt.Before(now) {
				a.StartsAt = a.EndsAt
			}
		}
		if a.EndsAt.IsZero() {
			a.EndsAt = now.Add(resolveTimeout)
		}
		if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Sprintf("alert %d: %v", i, err))
			continue
		}
		as = append(as, a)
	}
	n.Post(as)
	if len(errs) > 0 {
		apiError(w, http.StatusBadRequest, "%s", strings.Join(errs, "; "))
		return
	}
	w.WriteHeader(http.StatusOK)
}

type gettableSilence struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
	UpdatedAt time.Time `json:"updatedAt"`
	Matchers  []Matcher `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
}

func gettable(s Silence, now time.Time) gettableSilence {
	g := gettableSilence{ID: s.ID, UpdatedAt: s.UpdatedAt, StartsAt: s.StartsAt, EndsAt: s.EndsAt, CreatedBy: s.CreatedBy, Comment: s.Comment}
	g.Status.State = s.State(now)
	for _, m := range s.Matchers {
		eq := m.IsEqual == nil || *m.IsEqual
		m.IsEqual = &eq
		g.Matchers = append(g.Matchers, m)
	}
	return g
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

func (n *Notifier) getSilences(w http.ResponseWriter, r *http.Request) {
	fs, err := filters(r)
	if err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	n.mu.Lock()
	now := n.now()
	list := n.sil.list()
	n.mu.Unlock()
	out := []gettableSilence{}
	for _, s := range list {
		if silenceMatchesFilter(s, fs) {
			out = append(out, gettable(s, now))
		}
	}
	// Alertmanager lists active, then pending, then expired.
	rank := map[string]int{SilenceActive: 0, SilencePending: 1, SilenceExpired: 2}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].Status.State] < rank[out[j].Status.State] })
	writeJSON(w, http.StatusOK, out)
}

func (n *Notifier) postSilence(w http.ResponseWriter, r *http.Request) {
	var s Silence
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAPIBody)).Decode(&s); err != nil {
		apiError(w, http.StatusBadRequest, "cannot parse the silence: %v", err)
		return
	}
	id, err := n.SetSilence(s)
	switch {
	case errors.Is(err, ErrSilenceNotFound):
		apiError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, ErrSilenceInvalid):
		apiError(w, http.StatusBadRequest, "%v", err)
	case err != nil:
		apiError(w, http.StatusInternalServerError, "%v", err)
	default:
		writeJSON(w, http.StatusOK, map[string]string{"silenceID": id})
	}
}

func (n *Notifier) getSilence(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	s, ok := n.sil.byID[r.PathValue("id")]
	var g gettableSilence
	if ok {
		g = gettable(*s, n.now())
	}
	n.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "silence %s not found", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (n *Notifier) deleteSilence(w http.ResponseWriter, r *http.Request) {
	err := n.ExpireSilence(r.PathValue("id"))
	switch {
	case errors.Is(err, ErrSilenceNotFound):
		apiError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, ErrSilenceInvalid):
		apiError(w, http.StatusBadRequest, "%v", err)
	case err != nil:
		apiError(w, http.StatusInternalServerError, "%v", err)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func (n *Notifier) getStatus(w http.ResponseWriter, _ *http.Request) {
	n.mu.Lock()
	cfg := alertmanagerYAML(n.cfg)
	n.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"cluster": map[string]any{"status": "disabled", "peers": []any{}},
		"versionInfo": map[string]string{
			"version": n.opts.Version, "revision": "", "branch": "", "buildUser": "", "buildDate": "", "goVersion": runtime.Version(),
		},
		"config": map[string]string{"original": cfg},
		"uptime": n.started.UTC(),
	})
}

func (n *Notifier) getReceivers(w http.ResponseWriter, _ *http.Request) {
	n.mu.Lock()
	out := []apiReceiver{}
	for _, rc := range n.cfg.Receivers {
		out = append(out, apiReceiver{Name: rc.Name})
	}
	n.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (n *Notifier) getNotifications(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		l, err := strconv.Atoi(s)
		if err != nil || l <= 0 {
			apiError(w, http.StatusBadRequest, "limit %q: want a positive number", s)
			return
		}
		limit = min(l, maxHistory)
	}
	h, err := n.History(limit)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if h == nil {
		h = []Delivery{}
	}
	writeJSON(w, http.StatusOK, h)
}

// SetSilence creates a silence, or updates the one with s.ID, and returns
// its ID; see silences.set for when an update makes a new ID.
func (n *Notifier) SetSilence(s Silence) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sil.set(s, n.now())
}

// ExpireSilence ends a silence now.
func (n *Notifier) ExpireSilence(id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sil.expire(id, n.now())
}

// Silences returns all silences, newest first.
func (n *Notifier) Silences() []Silence {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sil.list()
}
