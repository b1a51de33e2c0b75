package ui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	apiv1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/aiserve/appliance/rules/rulefile"
)

// RulesRetriever is what /api/v1/rules and /api/v1/alerts read of the
// rules part; *rules.Manager implements it. Prometheus' own API handler
// lists the groups and alerts (apiv1.RulesRetriever); CompiledRules gives
// the appliance's extensions of each alerting rule, which rulesExtensions
// adds to the answer.
type RulesRetriever interface {
	apiv1.RulesRetriever
	// CompiledRules returns the compiled alerting rules of one source, by
	// the file name Prometheus' API reports for its groups. It is called
	// from concurrent requests; the caller must not modify the result.
	CompiledRules(file string) []rulefile.Compiled
}

// rulesExtensions wraps Prometheus' API handler: /api/v1/rules answers in
// Prometheus' format, each alerting rule with the appliance's extensions
// as extra fields that Prometheus' clients ignore:
//
//	sourceQuery  the expression as written, when query is generated from it
//	instances    {"min": N} / {"ratio": R} / {"all": true}, with "by"
//	escalated    true on the rule escalate_when_all added
//	warmup       the warm-up in seconds (0: none)
//	warmupHeld   true when the rule is held by a warm-up: its alerts wait
//	             until a new instance's warm-up is over (the embedded
//	             packs, rules.warmup, or the group's or rule's warmup)
//
// and /api/v1/alerts gives each alert of an instances rule the list
//
//	breachingInstances  ["10.0.0.5:8000", ...], from the annotation
//
// Prometheus' handler builds these answers from its own types, so the
// fields are added to its JSON. Other paths pass through untouched.
func rulesExtensions(rr RulesRetriever) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			amend := map[string]func([]byte) ([]byte, error){
				"/api/v1/rules":  func(b []byte) ([]byte, error) { return amendRules(rr, b) },
				"/api/v1/alerts": amendAlerts,
			}[r.URL.Path]
			if amend == nil || (r.Method != http.MethodGet && r.Method != http.MethodPost) {
				next.ServeHTTP(w, r)
				return
			}
			// The answer is plain JSON: compressAPI, outside, asked for it.
			rec := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
			next.ServeHTTP(rec, r)
			body := rec.buf.Bytes()
			if rec.code == http.StatusOK {
				if out, err := amend(body); err == nil {
					body = out
				}
			}
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(rec.code)
			_, _ = w.Write(body)
		})
	}
}

type bufferedResponse struct {
	header http.Header
	code   int
	buf    bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.buf.Write(p) }

// amendRules adds the extension fields to a /api/v1/rules answer.
func amendRules(rr RulesRetriever, body []byte) ([]byte, error) {
	var env, data map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(env["data"], &data); err != nil {
		return nil, err
	}
	var groups []map[string]json.RawMessage
	if err := json.Unmarshal(data["groups"], &groups); err != nil {
		return nil, err
	}
	for _, g := range groups {
		var file, name string
		_ = json.Unmarshal(g["file"], &file)
		_ = json.Unmarshal(g["name"], &name)
		compiled := rr.CompiledRules(file)
		var rules []map[string]any
		if err := json.Unmarshal(g["rules"], &rules); err != nil {
			return nil, err
		}
		for _, r := range rules {
			if r["type"] != "alerting" {
				continue
			}
			// The rule and its escalated twin differ in their priority.
			prio := ""
			if l, ok := r["labels"].(map[string]any); ok {
				prio, _ = l["priority"].(string)
			}
			for _, c := range compiled {
				if c.Group == name && c.Alert == r["name"] && c.Priority == prio {
					amendRule(r, c)
					break
				}
			}
		}
		raw, err := json.Marshal(rules)
		if err != nil {
			return nil, err
		}
		g["rules"] = raw
	}
	var err error
	if data["groups"], err = json.Marshal(groups); err != nil {
		return nil, err
	}
	if env["data"], err = json.Marshal(data); err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

func amendRule(r map[string]any, c rulefile.Compiled) {
	if c.Source != c.Expr {
		r["sourceQuery"] = c.Source
	}
	if in := c.Instances; in != nil {
		x := map[string]any{"by": in.By}
		switch {
		case in.Min > 0:
			x["min"] = in.Min
		case in.All:
			x["all"] = true
		default:
			x["ratio"] = in.Ratio
		}
		r["instances"] = x
	}
	if c.Escalated {
		r["escalated"] = true
	}
	r["warmup"] = c.Warmup.Seconds()
	r["warmupHeld"] = c.Warmup > 0
}

// amendAlerts adds breachingInstances to a /api/v1/alerts answer.
func amendAlerts(body []byte) ([]byte, error) {
	var env, data map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(env["data"], &data); err != nil {
		return nil, err
	}
	var alerts []map[string]any
	if err := json.Unmarshal(data["alerts"], &alerts); err != nil {
		return nil, err
	}
	for _, a := range alerts {
		ann, _ := a["annotations"].(map[string]any)
		list, ok := ann[rulefile.BreachingAnnotation].(string)
		if !ok {
			continue
		}
		insts := []string{}
		if list != "" {
			insts = strings.Split(list, ", ")
		}
		a["breachingInstances"] = insts
	}
	var err error
	if data["alerts"], err = json.Marshal(alerts); err != nil {
		return nil, err
	}
	if env["data"], err = json.Marshal(data); err != nil {
		return nil, err
	}
	return json.Marshal(env)
}
