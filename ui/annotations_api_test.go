package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/ui/dashboard"
)

// TestPostAnnotations: a posted release is stored in the state file and
// listed by GET with the annotations read from the series; tags= filters;
// bad bodies are answered 400 with the reason.
func TestPostAnnotations(t *testing.T) {
	ts := newTestServer(t, nil)
	store, err := dashboard.NewAnnotationStore(ts.db.State())
	require.NoError(t, err)
	// The handlers read the options per request.
	ts.srv.opts.Annotations = store

	now := time.Now().Truncate(time.Second)
	start := now.Add(-10 * time.Minute)
	var lines []string
	for i := 0; i <= 20; i++ {
		at := start.Add(time.Duration(i) * 30 * time.Second)
		st := start.Add(-time.Hour)
		if i >= 10 {
			st = start.Add(5 * time.Minute)
		}
		lines = append(lines, fmt.Sprintf(`process_start_time_seconds{job="vllm",instance="a"} %d %d`, st.Unix(), at.UnixMilli()))
	}
	ts.importLines(lines)

	release := start.Add(5 * time.Minute)
	code, body := ts.post("/api/v1/appliance/annotations", "application/json",
		[]byte(fmt.Sprintf(`{"time": %d, "text": "deploy llama v2", "tags": ["release"], "labels": {"model_name": "llama", "version": "v2"}}`, release.Unix())))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"kind":"release"`)
	code, body = ts.post("/api/v1/appliance/annotations", "application/json",
		[]byte(`{"time": "`+start.Add(time.Minute).UTC().Format(time.RFC3339)+`", "text": "maintenance window", "end": "`+start.Add(2*time.Minute).UTC().Format(time.RFC3339)+`"}`))
	require.Equal(t, http.StatusOK, code, body)

	var anns []dashboard.Annotation
	ts.getJSON(fmt.Sprintf("/api/v1/appliance/annotations?from=%d&to=%d", start.Unix(), now.Unix()), http.StatusOK, &anns)
	var kinds []string
	for _, a := range anns {
		kinds = append(kinds, a.Kind)
	}
	require.Equal(t, []string{"note", "release", "restart"}, kinds, "%+v", anns)
	rel := anns[1]
	require.Equal(t, float64(release.Unix()), rel.Time)
	require.Equal(t, rel.Time, rel.End)
	require.Equal(t, "deploy llama v2", rel.Text)
	require.Equal(t, map[string]string{"model_name": "llama", "version": "v2"}, rel.Labels)
	require.NotEmpty(t, rel.ID)
	require.Equal(t, float64(start.Add(2*time.Minute).Unix()), anns[0].End)

	ts.getJSON(fmt.Sprintf("/api/v1/appliance/annotations?from=%d&to=%d&tags=release", start.Unix(), now.Unix()), http.StatusOK, &anns)
	require.Len(t, anns, 1)
	require.Equal(t, "deploy llama v2", anns[0].Text)
	ts.getJSON(fmt.Sprintf("/api/v1/appliance/annotations?from=%d&to=%d", now.Add(-time.Minute).Unix(), now.Unix()), http.StatusOK, &anns)
	require.Empty(t, anns, "outside the range")

	for _, c := range []struct {
		ct, body string
		code     int
		want     string
	}{
		{"application/json", `{"text": "x"}`, 400, "time is required"},
		{"application/json", `{"time": "yesterday", "text": "x"}`, 400, `time: want Unix seconds or RFC 3339`},
		{"application/json", `{"time": 10, "text": ""}`, 400, "text is required"},
		{"application/json", `{"time": 10, "text": "x", "colour": "red"}`, 400, `unknown field "colour"`},
		{"application/json", `{"time": 10, "text": "x", "labels": {"a-b": "1"}}`, 400, `label name "a-b"`},
		{"application/json", `{"time": 10, "text": "x", "tags": "release"}`, 400, "body: json: cannot unmarshal"},
		{"application/json", `not json`, 400, "body: invalid character"},
		{"text/plain", `{"time": 10, "text": "x"}`, 415, "want Content-Type: application/json"},
		{"application/json", `{"time": 10, "text": "` + strings.Repeat("x", 70<<10) + `"}`, 413, "at most"},
	} {
		code, body := ts.post("/api/v1/appliance/annotations", c.ct, []byte(c.body))
		require.Equal(t, c.code, code, "%s: %s", c.body[:min(len(c.body), 60)], body)
		var env applianceEnvelope
		require.NoError(t, json.Unmarshal([]byte(body), &env), body)
		require.Equal(t, "error", env.Status)
		require.Contains(t, env.Error, c.want)
	}
}
