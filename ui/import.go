package ui

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"

	appstorage "github.com/aiserve/appliance/storage"
)

// importSample is one parsed sample of an import body.
type importSample struct {
	lset labels.Labels
	t    int64
	v    float64
}

// importPrometheus stores a body in Prometheus' text format (or OpenMetrics
// when the Content-Type says so). Each sample may carry a millisecond
// timestamp; samples without one get the time the request arrived. Query
// parameters extra_label=name=value add labels to every sample, as in
// VictoriaMetrics. The whole body is parsed before anything is appended, so
// a bad line rejects the body with 400 and stores nothing.
func (s *Server) importPrometheus(c echo.Context) error {
	req := c.Request()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return apiError(c, http.StatusRequestEntityTooLarge, "bad_data",
				fmt.Sprintf("request body exceeds the limit of %d bytes (web.max_request_body_bytes)", mbe.Limit))
		}
		return apiError(c, http.StatusBadRequest, "bad_data", "read body: "+err.Error())
	}
	extra, err := parseExtraLabels(req.URL.Query()["extra_label"])
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	now := time.Now().UnixMilli()
	samples, meta, err := parseImport(body, req.Header.Get("Content-Type"), extra, now)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}

	if err := s.ingestBlocked(); err != nil {
		_, herr := s.importError(c, err, len(samples), "")
		return herr
	}
	limits := s.labelLimits()
	// Fsynced before the 204: the sender may drop its copy.
	app := s.opts.Storage.AppenderV2(appstorage.WithSyncCommit(req.Context()))
	for _, smp := range samples {
		err := limits.check(smp.lset)
		if err == nil {
			_, err = app.Append(0, smp.lset, 0, smp.t, smp.v, nil, nil, storage.AOptions{})
		}
		if err != nil {
			_ = app.Rollback()
			if ok, herr := s.importError(c, err, len(samples), fmt.Sprintf("sample @%d", smp.t)); ok {
				return herr
			}
			return apiError(c, http.StatusBadRequest, "bad_data",
				fmt.Sprintf("sample %s @%d: %s; nothing of this body was stored", appstorage.SeriesPrefix(smp.lset), smp.t, err))
		}
	}
	if err := app.Commit(); err != nil {
		if ok, herr := s.importError(c, err, len(samples), "store samples"); ok {
			return herr
		}
		return apiError(c, http.StatusInternalServerError, "internal", "store samples: "+err.Error())
	}
	for family, m := range meta {
		s.opts.Storage.SetMetadata(family, m)
	}
	return c.NoContent(http.StatusNoContent)
}

func parseExtraLabels(params []string) (labels.Labels, error) {
	b := labels.NewScratchBuilder(len(params))
	for _, p := range params {
		name, val, ok := strings.Cut(p, "=")
		if !ok || !model.LegacyValidation.IsValidLabelName(name) {
			return labels.EmptyLabels(), fmt.Errorf("extra_label %q: want name=value with a valid label name", p)
		}
		b.Add(name, val)
	}
	b.Sort()
	return b.Labels(), nil
}

// parseImport parses the whole body. It returns the samples, the metadata of
// each family that has a TYPE, HELP or UNIT line, or an error naming the
// first bad line.
func parseImport(body []byte, contentType string, extra labels.Labels, now int64) ([]importSample, map[string]metadata.Metadata, error) {
	ct := "text/plain"
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt == "application/openmetrics-text" {
		ct = contentType
	}
	p, err := textparse.New(body, ct, labels.NewSymbolTable(), textparse.ParserOptions{})
	if p == nil {
		return nil, nil, fmt.Errorf("content type %q: %w", contentType, err)
	}
	var (
		samples []importSample
		meta    = map[string]metadata.Metadata{}
		lset    labels.Labels
		lb      = labels.NewBuilder(labels.EmptyLabels())
	)
	for {
		et, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, locateParseError(body, ct, err)
		}
		switch et {
		case textparse.EntryType:
			name, typ := p.Type()
			m := meta[string(name)]
			m.Type = typ
			meta[string(name)] = m
		case textparse.EntryHelp:
			name, help := p.Help()
			m := meta[string(name)]
			m.Help = string(help)
			meta[string(name)] = m
		case textparse.EntryUnit:
			name, unit := p.Unit()
			m := meta[string(name)]
			m.Unit = string(unit)
			meta[string(name)] = m
		case textparse.EntrySeries:
			_, ts, v := p.Series()
			p.Labels(&lset)
			t := now
			if ts != nil {
				t = *ts
			}
			if math.IsNaN(v) && !value.IsStaleNaN(v) {
				// A NaN sample is stored as written; only the stale
				// marker has its own meaning.
				v = math.NaN()
			}
			if !extra.IsEmpty() {
				lb.Reset(lset)
				extra.Range(func(l labels.Label) { lb.Set(l.Name, l.Value) })
				lset = lb.Labels()
			}
			samples = append(samples, importSample{lset: lset.Copy(), t: t, v: v})
		case textparse.EntryHistogram:
			return nil, nil, errors.New("native histograms cannot be imported: the storage keeps float samples only")
		}
	}
	if len(samples) == 0 && len(bytes.TrimSpace(body)) > 0 && len(meta) == 0 {
		return nil, nil, errors.New("body has no samples")
	}
	return samples, meta, nil
}

// locateParseError finds the line a parse error belongs to. The parser does
// not report positions, so on this (rare) error path each line is parsed on
// its own until one fails.
func locateParseError(body []byte, ct string, perr error) error {
	for i, line := range bytes.Split(body, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		one := append(append([]byte{}, line...), '\n')
		p, _ := textparse.New(one, ct, nil, textparse.ParserOptions{})
		if p == nil {
			break
		}
		for {
			_, err := p.Next()
			if err == nil {
				continue
			}
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("line %d: %w; nothing of this body was stored", i+1, err)
		}
	}
	return fmt.Errorf("%w; nothing of this body was stored", perr)
}
