package ui

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	appstorage "github.com/aiserve/appliance/storage"
)

// mountFederation serves /federate, /api/v1/export and the JSON-lines
// /api/v1/import, under the same auth, ingest gate and body limit as the
// other endpoints. Echo's router prefers these exact routes over the
// /api/v1/* wildcard of Prometheus' API.
func (s *Server) mountFederation(e *echo.Echo) {
	e.GET("/federate", s.federate)
	e.GET("/api/v1/export", s.export)
	e.POST("/api/v1/export", s.export)
	e.POST("/api/v1/import", s.importJSONLines, s.ingestGate, s.limitBody, s.decodeBody)
}

// export serves /api/v1/export in VictoriaMetrics' JSON-lines format, one
// line per series:
//
//	{"metric":{"__name__":"x","job":"y"},"values":[1,2],"timestamps":[1700000000000,1700000015000]}
//
// It reads the raw tier only, so the samples are the ones stored, never
// rollups: a range older than the raw retention exports nothing for that
// part. Series are listed first (labels only), then read and written one at
// a time and flushed, so the memory held is one series' samples, not the
// whole answer. max_rows_per_line splits a series' samples over several
// lines of at most that many, as VictoriaMetrics does. NaN is written as
// null and infinities as "Infinity"/"-Infinity" (VictoriaMetrics'
// spelling); stale markers are left out.
func (s *Server) export(c echo.Context) error {
	req := c.Request()
	if err := req.ParseForm(); err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", "error parsing form values: "+err.Error())
	}
	matcherSets, err := s.parseMatchers(req.Form["match[]"])
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	now := time.Now()
	mint, err := parseExportTime(req.Form.Get("start"), 0)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", "invalid parameter \"start\": "+err.Error())
	}
	maxt, err := parseExportTime(req.Form.Get("end"), now.UnixMilli())
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", "invalid parameter \"end\": "+err.Error())
	}
	if mint > maxt {
		return apiError(c, http.StatusBadRequest, "bad_data", "end timestamp must not be before start time")
	}
	maxRows := 0
	if v := req.Form.Get("max_rows_per_line"); v != "" {
		if maxRows, err = strconv.Atoi(v); err != nil || maxRows < 0 {
			return apiError(c, http.StatusBadRequest, "bad_data", "invalid parameter \"max_rows_per_line\": want a count")
		}
	}

	ctx := appstorage.WithMaxSourceResolution(req.Context(), appstorage.TierRaw)
	q, err := s.opts.Storage.Querier(mint, maxt)
	if err != nil {
		return apiError(c, http.StatusInternalServerError, "internal", err.Error())
	}
	defer q.Close()

	// The series first, labels only.
	listHints := &storage.SelectHints{Start: mint, End: maxt, Func: "series"}
	sets := make([]storage.SeriesSet, 0, len(matcherSets))
	for _, ms := range matcherSets {
		sets = append(sets, q.Select(ctx, true, listHints, ms...))
	}
	set := storage.NewMergeSeriesSet(sets, 0, storage.ChainedSeriesMerge)
	var all []labels.Labels
	for set.Next() {
		all = append(all, set.At().Labels())
	}
	if err := set.Err(); err != nil {
		return apiError(c, http.StatusInternalServerError, "internal", err.Error())
	}

	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/stream+json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	hints := &storage.SelectHints{Start: mint, End: maxt}
	var (
		it   chunkenc.Iterator
		ts   []int64
		vs   []float64
		line []byte
	)
	for _, lset := range all {
		ms := make([]*labels.Matcher, 0, lset.Len())
		lset.Range(func(l labels.Label) {
			ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, l.Name, l.Value))
		})
		one := q.Select(ctx, false, hints, ms...)
		ts, vs = ts[:0], vs[:0]
		for one.Next() {
			if !labels.Equal(one.At().Labels(), lset) {
				continue // a series with more labels than these
			}
			it = one.At().Iterator(it)
			for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
				if vt != chunkenc.ValFloat {
					continue
				}
				t, v := it.At()
				if t < mint || t > maxt || value.IsStaleNaN(v) {
					continue
				}
				ts, vs = append(ts, t), append(vs, v)
			}
			if err := it.Err(); err != nil {
				return s.abortExport(err)
			}
		}
		if err := one.Err(); err != nil {
			return s.abortExport(err)
		}
		for start := 0; start < len(ts); {
			end := len(ts)
			if maxRows > 0 && end-start > maxRows {
				end = start + maxRows
			}
			line = appendExportLine(line[:0], lset, ts[start:end], vs[start:end])
			if _, err := bw.Write(line); err != nil {
				return nil // the client went away
			}
			start = end
		}
		if bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return nil
			}
			w.Flush()
		}
	}
	_ = bw.Flush()
	return nil
}

// abortExport ends an export whose answer has begun: the status is sent
// already, so the error aborts the connection, and the client sees a body
// cut short (an incomplete chunked encoding), never a clean end.
func (s *Server) abortExport(err error) error {
	s.logger.Warn("export cut short", "err", err)
	panic(http.ErrAbortHandler)
}

// appendExportLine appends one JSON line for a series' samples.
func appendExportLine(b []byte, lset labels.Labels, ts []int64, vs []float64) []byte {
	b = append(b, `{"metric":{`...)
	first := true
	lset.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendQuote(b, l.Name)
		b = append(b, ':')
		b = appendJSONString(b, l.Value)
	})
	b = append(b, `},"values":[`...)
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		switch {
		case math.IsNaN(v):
			b = append(b, "null"...)
		case math.IsInf(v, 1):
			b = append(b, `"Infinity"`...)
		case math.IsInf(v, -1):
			b = append(b, `"-Infinity"`...)
		default:
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	b = append(b, `],"timestamps":[`...)
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, t, 10)
	}
	return append(b, "]}\n"...)
}

func appendJSONString(b []byte, s string) []byte {
	enc, _ := json.Marshal(s)
	return append(b, enc...)
}

// parseExportTime reads start or end as VictoriaMetrics does: Unix seconds
// (fractions allowed), Unix milliseconds when the number is too large to be
// seconds, or RFC 3339; empty gives def.
func parseExportTime(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("cannot parse %q to a valid timestamp", s)
		}
		if math.Abs(f) >= 1e11 { // past year 5138 as seconds: milliseconds
			return int64(f), nil
		}
		return int64(math.Round(f * 1000)), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q to a valid timestamp", s)
	}
	return t.UnixMilli(), nil
}

// importBatchSamples is how many samples one commit of a JSON-lines import
// holds; each commit is fsynced.
const importBatchSamples = 64 << 10

// exportLine is one line of VictoriaMetrics' JSON-lines format.
type exportLine struct {
	Metric     map[string]string `json:"metric"`
	Values     []json.RawMessage `json:"values"`
	Timestamps []int64           `json:"timestamps"`
}

// importJSONLines stores a body in the format /api/v1/export writes (and
// VictoriaMetrics' /api/v1/import takes); decodeBody undoes a
// Content-Encoding. The body is read line by line and committed (with its
// fsync) every importBatchSamples samples, so memory stays bounded; a bad
// line answers 400 naming it and which lines before it were stored.
// extra_label=name=value adds labels to every series, as in
// VictoriaMetrics.
func (s *Server) importJSONLines(c echo.Context) error {
	req := c.Request()
	extra, err := parseExtraLabels(req.URL.Query()["extra_label"])
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	if err := s.ingestBlocked(); err != nil {
		return refuseImport(c, s.ingestRefusal(err, 0, "", importStored{}))
	}
	limits := s.labelLimits()
	br := bufio.NewReaderSize(req.Body, 256<<10)
	var (
		stored  importStored // committed
		pending int
		lineNo  int
		lb      = labels.NewBuilder(labels.EmptyLabels())
		app     = s.opts.Storage.AppenderV2(appstorage.WithSyncCommit(req.Context()))
	)
	fail := func(code int, msg string) error {
		_ = app.Rollback()
		return apiError(c, code, "bad_data", fmt.Sprintf("line %d: %s", lineNo, msg)+stored.note())
	}
	for {
		raw, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			r := readRefusal(rerr)
			return fail(r.code, r.msg)
		}
		lineNo++
		if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 {
			var l exportLine
			if err := json.Unmarshal(trimmed, &l); err != nil {
				return fail(http.StatusBadRequest, "cannot parse JSON line: "+err.Error())
			}
			if len(l.Values) != len(l.Timestamps) {
				return fail(http.StatusBadRequest, fmt.Sprintf("`timestamps` array size must match `values` array size; got %d; want %d", len(l.Timestamps), len(l.Values)))
			}
			lb.Reset(labels.EmptyLabels())
			for name, v := range l.Metric {
				lb.Set(name, v)
			}
			extra.Range(func(x labels.Label) { lb.Set(x.Name, x.Value) })
			lset := lb.Labels()
			if lset.Get(labels.MetricName) == "" {
				return fail(http.StatusBadRequest, "series has no __name__")
			}
			if err := limits.check(lset); err != nil {
				// Counted as the other imports count it: the batch is refused.
				if r := s.ingestRefusal(err, pending+len(l.Values), fmt.Sprintf("line %d: series %s", lineNo, appstorage.SeriesPrefix(lset)), stored); r != nil {
					_ = app.Rollback()
					return refuseImport(c, r)
				}
				return fail(http.StatusBadRequest, fmt.Sprintf("series %s: %s", appstorage.SeriesPrefix(lset), err))
			}
			for i, rv := range l.Values {
				v, err := parseImportValue(rv)
				if err != nil {
					return fail(http.StatusBadRequest, fmt.Sprintf("value at position %d: %s", i, err))
				}
				if _, err := app.Append(0, lset, 0, l.Timestamps[i], v, nil, nil, storage.AOptions{}); err != nil {
					if r := s.ingestRefusal(err, pending, fmt.Sprintf("line %d", lineNo), stored); r != nil {
						_ = app.Rollback()
						return refuseImport(c, r)
					}
					return fail(http.StatusBadRequest, fmt.Sprintf("sample %s @%d: %s", appstorage.SeriesPrefix(lset), l.Timestamps[i], err))
				}
				pending++
			}
			if pending >= importBatchSamples {
				if r := s.commitImport(app, pending, stored); r != nil {
					return refuseImport(c, r)
				}
				stored = importStored{lines: lineNo, samples: stored.samples + pending}
				pending = 0
				app = s.opts.Storage.AppenderV2(appstorage.WithSyncCommit(req.Context()))
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
	}
	if r := s.commitImport(app, pending, stored); r != nil {
		return refuseImport(c, r)
	}
	return c.NoContent(http.StatusNoContent)
}

// parseImportValue reads a value of the values array: a number, null (NaN)
// or one of VictoriaMetrics' strings for the special floats.
func parseImportValue(raw json.RawMessage) (float64, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "null" {
		return math.NaN(), nil
	}
	if strings.HasPrefix(s, `"`) {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return 0, err
		}
		neg := strings.HasPrefix(str, "-")
		switch strings.TrimPrefix(str, "-") {
		case "infinity", "Infinity", "Inf", "inf":
			if neg {
				return math.Inf(-1), nil
			}
			return math.Inf(1), nil
		case "null", "Null", "nan", "NaN":
			return math.NaN(), nil
		}
		return 0, fmt.Errorf("unsupported string %q", str)
	}
	return strconv.ParseFloat(s, 64)
}
