package ui

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"google.golang.org/protobuf/proto"

	appstorage "github.com/aiserve/appliance/storage"
)

// errNoMatch is Prometheus' answer to a series request without selectors.
var errNoMatch = errors.New("no match[] parameter provided")

// federate serves /federate as Prometheus does: the latest sample, within
// the lookback delta, of every series that matches one of the match[]
// selectors, in the exposition format the scraper asks for (text 0.0.4
// unless the Accept header prefers protobuf). Series are grouped under one
// untyped family per metric name; the config's external labels are added
// where a series does not carry the label already, and every series
// carries an instance label (empty when it has none), so a Prometheus
// scraping with honor_labels: true keeps the series' own job and instance.
// Stale markers are left out: the formats cannot carry them.
func (s *Server) federate(c echo.Context) error {
	req := c.Request()
	if err := req.ParseForm(); err != nil {
		return c.String(http.StatusBadRequest, fmt.Sprintf("error parsing form values: %v\n", err))
	}
	matcherSets, err := s.parseMatchers(req.Form["match[]"])
	if err != nil {
		return c.String(http.StatusBadRequest, err.Error()+"\n")
	}
	lookback := s.opts.LookbackDelta
	if lookback <= 0 {
		lookback = 5 * time.Minute
	}
	maxt := time.Now().UnixMilli()
	mint := maxt - lookback.Milliseconds()

	// The lookback is far inside the raw tier; read raw alone.
	ctx := appstorage.WithMaxSourceResolution(req.Context(), appstorage.TierRaw)
	q, err := s.opts.Storage.Querier(mint, maxt)
	if err != nil {
		return c.String(http.StatusInternalServerError, err.Error()+"\n")
	}
	defer q.Close()
	hints := &storage.SelectHints{Start: mint, End: maxt}
	sets := make([]storage.SeriesSet, 0, len(matcherSets))
	for _, ms := range matcherSets {
		sets = append(sets, q.Select(ctx, true, hints, ms...))
	}
	set := storage.NewMergeSeriesSet(sets, 0, storage.ChainedSeriesMerge)

	type latest struct {
		lset labels.Labels
		t    int64
		v    float64
	}
	var vec []latest
	var it chunkenc.Iterator
	for set.Next() {
		series := set.At()
		it = series.Iterator(it)
		found := false
		var t int64
		var v float64
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				continue
			}
			st, sv := it.At()
			if st < mint || st > maxt {
				continue
			}
			t, v, found = st, sv, true
		}
		if it.Err() != nil {
			return c.String(http.StatusInternalServerError, it.Err().Error()+"\n")
		}
		if !found || value.IsStaleNaN(v) {
			continue
		}
		vec = append(vec, latest{lset: series.Labels(), t: t, v: v})
	}
	if err := set.Err(); err != nil {
		return c.String(http.StatusInternalServerError, err.Error()+"\n")
	}
	slices.SortStableFunc(vec, func(a, b latest) int {
		return strings.Compare(a.lset.Get(labels.MetricName), b.lset.Get(labels.MetricName))
	})

	external := map[string]string{}
	if s.opts.PromConfig != nil {
		external = s.opts.PromConfig().GlobalConfig.ExternalLabels.Map()
	}
	if _, ok := external[model.InstanceLabel]; !ok {
		external[model.InstanceLabel] = ""
	}
	externalNames := make([]string, 0, len(external))
	for name := range external {
		externalNames = append(externalNames, name)
	}
	slices.Sort(externalNames)

	format := expfmt.NegotiateAccept(req.Header,
		expfmt.NewFormat(expfmt.TypeProtoDelim), expfmt.NewFormat(expfmt.TypeProtoText),
		expfmt.NewFormat(expfmt.TypeProtoCompact), expfmt.NewFormat(expfmt.TypeTextPlain))
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, string(format))
	w.WriteHeader(http.StatusOK)
	enc := expfmt.NewEncoder(w, format)

	var fam *dto.MetricFamily
	used := map[string]bool{} // a series' own label names, cleared for each
	for _, smp := range vec {
		name := smp.lset.Get(labels.MetricName)
		if name == "" {
			continue
		}
		if fam == nil || fam.GetName() != name {
			if fam != nil {
				if err := enc.Encode(fam); err != nil {
					return nil // the scraper went away
				}
			}
			fam = &dto.MetricFamily{Name: proto.String(name), Type: dto.MetricType_UNTYPED.Enum()}
		}
		m := &dto.Metric{TimestampMs: proto.Int64(smp.t), Untyped: &dto.Untyped{Value: proto.Float64(smp.v)}}
		clear(used)
		smp.lset.Range(func(l labels.Label) {
			if l.Name == labels.MetricName || l.Value == "" {
				return
			}
			m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(l.Name), Value: proto.String(l.Value)})
			used[l.Name] = true
		})
		for _, ln := range externalNames {
			if !used[ln] {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(ln), Value: proto.String(external[ln])})
			}
		}
		fam.Metric = append(fam.Metric, m)
	}
	if fam != nil {
		_ = enc.Encode(fam)
	}
	if closer, ok := enc.(expfmt.Closer); ok {
		_ = closer.Close()
	}
	return nil
}

// parseMatchers parses match[] selectors with the engine's parser (and its
// bounds on query text); at least one is required.
func (s *Server) parseMatchers(selectors []string) ([][]*labels.Matcher, error) {
	if len(selectors) == 0 {
		return nil, errNoMatch
	}
	return engineParser(s.opts.Engine).ParseMetricSelectors(selectors)
}
