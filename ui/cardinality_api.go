package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/aiserve/appliance/cardinality"
	"github.com/aiserve/appliance/storage"
)

// The cardinality page's back-end (package cardinality), and the
// storage.max_series refusals shown on the targets:
//
//	GET /api/v1/appliance/cardinality
//	    -> {"status":"success","data": cardinality.Report}
//	GET /api/v1/targets
//	    Prometheus' answer; a target whose last scrape had samples of new
//	    series refused by storage.max_series gets the reason in lastError
//	    (the scrape itself succeeded: its other series are stored).

// CardinalityReporter computes the cardinality report (cardinality.Analyzer).
type CardinalityReporter interface {
	Report(ctx context.Context) (*cardinality.Report, error)
}

// seriesLimits is the storage's storage.max_series guard, when it has one.
type seriesLimits interface {
	SeriesLimit() storage.SeriesLimit
}

func (a *applianceAPI) cardinality(c echo.Context) error {
	if a.s.opts.Cardinality == nil {
		return apiError(c, http.StatusNotFound, "not_found", "the cardinality check is not configured")
	}
	r, err := a.s.opts.Cardinality.Report(c.Request().Context())
	if err != nil {
		return apiError(c, http.StatusInternalServerError, "internal", err.Error())
	}
	return c.JSON(http.StatusOK, apiWarnings{Status: "success", Data: r})
}

// targetsWithRefusals wraps Prometheus' /api/v1/targets: a target whose
// last scrape (lastScrape or later) had samples of new series refused by
// storage.max_series says so in lastError.
func (s *Server) targetsWithRefusals(next http.Handler) http.Handler {
	sl, ok := s.opts.Storage.(seriesLimits)
	if !ok {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lim := sl.SeriesLimit()
		if len(lim.Refusals) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		// The answer is plain JSON: compressAPI, outside, asked for it.
		held := &heldResponse{header: w.Header()}
		next.ServeHTTP(held, r)
		if held.code != 0 && held.code != http.StatusOK {
			held.flush(w)
			return
		}
		body, err := patchTargets(held.body.Bytes(), lim)
		if err != nil {
			held.flush(w)
			return
		}
		held.body.Reset()
		held.body.Write(body)
		w.Header().Del("Content-Length")
		held.flush(w)
	})
}

// patchTargets adds the refusals to the lastError of the active targets
// they belong to.
func patchTargets(body []byte, lim storage.SeriesLimit) ([]byte, error) {
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(resp["data"], &data); err != nil {
		return nil, err
	}
	var active []map[string]json.RawMessage
	if err := json.Unmarshal(data["activeTargets"], &active); err != nil {
		return nil, err
	}
	byKey := make(map[storage.TargetKey]storage.SeriesRefusal, len(lim.Refusals))
	for _, rf := range lim.Refusals {
		byKey[rf.TargetKey] = rf
	}
	changed := false
	for _, t := range active {
		var ls map[string]string
		var last time.Time
		var lastErr string
		_ = json.Unmarshal(t["labels"], &ls)
		_ = json.Unmarshal(t["lastScrape"], &last)
		_ = json.Unmarshal(t["lastError"], &lastErr)
		rf, ok := byKey[storage.TargetKey{Job: ls["job"], Instance: ls["instance"]}]
		if !ok || rf.Last.Before(last) {
			continue
		}
		msg := fmt.Sprintf("storage.max_series (%d active series) reached: samples of new series refused (%d since start, the last %s); the target's other series are stored",
			lim.Limit, rf.Samples, rf.Example)
		if lastErr != "" {
			msg = lastErr + "; " + msg
		}
		t["lastError"], _ = json.Marshal(msg)
		changed = true
	}
	if !changed {
		return body, nil
	}
	var err error
	if data["activeTargets"], err = json.Marshal(active); err != nil {
		return nil, err
	}
	if resp["data"], err = json.Marshal(data); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
