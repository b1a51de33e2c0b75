package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/aiserve/appliance/ui/dashboard"
)

// Annotations stores the annotations posted to
// /api/v1/appliance/annotations and the recorded releases
// (dashboard.AnnotationStore implements it).
type Annotations interface {
	Add(a dashboard.Annotation) (dashboard.Annotation, error)
	List(from, to time.Time, tags ...string) ([]dashboard.Annotation, error)
}

// maxAnnotationBody bounds a posted annotation.
const maxAnnotationBody = 64 << 10

// annotationTags reads the tags filter: tags=a,b or repeated tag=a&tag=b.
func annotationTags(c echo.Context) []string {
	var out []string
	for _, v := range append(c.QueryParams()["tags"], c.QueryParams()["tag"]...) {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// listAnnotations answers GET /api/v1/appliance/annotations: the spans and
// marks read from the series (dashboard.Annotations) and the stored
// annotations over from..to, sorted by time; tags= keeps those with every
// tag named.
func (a *applianceAPI) listAnnotations(c echo.Context) error {
	from, to, err := timeRange(c, time.Hour)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	out, err := dashboard.Annotations(c.Request().Context(), a.s.opts.Engine, a.s.opts.Storage, from, to)
	if err != nil {
		return apiError(c, http.StatusUnprocessableEntity, "execution", err.Error())
	}
	if st := a.s.opts.Annotations; st != nil {
		stored, err := st.List(from, to)
		if err != nil {
			return apiError(c, http.StatusInternalServerError, "internal", err.Error())
		}
		out = append(out, stored...)
		dashboard.SortAnnotations(out)
	}
	return apiSuccess(c, dashboard.FilterTags(out, annotationTags(c)))
}

// postedAnnotation is the body of POST /api/v1/appliance/annotations.
// Times are Unix seconds or RFC 3339.
type postedAnnotation struct {
	Time   json.RawMessage   `json:"time"`
	End    json.RawMessage   `json:"end"`
	Text   string            `json:"text"`
	Kind   string            `json:"kind"`
	Tags   []string          `json:"tags"`
	Labels map[string]string `json:"labels"`
}

func annotationTime(name string, raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
			return 0, fmt.Errorf("%s: want Unix seconds above 0, got %s", name, raw)
		}
		return f, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s: want Unix seconds or an RFC 3339 string, got %s", name, raw)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && !math.IsInf(f, 0) {
		return f, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%s: want Unix seconds or RFC 3339 such as \"2026-12-01T12:00:00Z\", got %q", name, s)
	}
	return float64(t.UnixMilli()) / 1000, nil
}

// postAnnotation answers POST /api/v1/appliance/annotations: a deploy
// script marks a release ({"time":..,"text":..,"tags":["release"],
// "labels":{..}}), stored in the state file and drawn on every chart. A
// body the appliance cannot take is answered 400 with the reason.
func (a *applianceAPI) postAnnotation(c echo.Context) error {
	st := a.s.opts.Annotations
	if st == nil {
		return apiError(c, http.StatusNotFound, "not_found", "annotations are not stored by this appliance")
	}
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return apiError(c, http.StatusUnsupportedMediaType, "bad_data", "want Content-Type: application/json, got "+strconv.Quote(ct))
	}
	body, err := readLimited(c, maxAnnotationBody)
	if err != nil {
		return apiError(c, http.StatusRequestEntityTooLarge, "bad_data", fmt.Sprintf("an annotation is at most %d bytes", maxAnnotationBody))
	}
	var in postedAnnotation
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data",
			"body: "+err.Error()+`; want {"time": <Unix seconds or RFC 3339>, "text": "...", "tags": ["release"], "labels": {"name": "value"}}`)
	}
	ann := dashboard.Annotation{Text: in.Text, Kind: in.Kind, Tags: in.Tags, Labels: in.Labels}
	if ann.Time, err = annotationTime("time", in.Time); err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	if ann.End, err = annotationTime("end", in.End); err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	stored, err := st.Add(ann)
	switch {
	case errors.Is(err, dashboard.ErrBadAnnotation):
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	case err != nil:
		return apiError(c, http.StatusInternalServerError, "internal", err.Error())
	}
	return apiSuccess(c, stored)
}

func readLimited(c echo.Context, limit int64) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(c.Response(), c.Request().Body, limit))
	return b.Bytes(), err
}
