package ui

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
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

// The text import streams its body. It reads whole lines in batches of
// about importBatchBytes, parses a batch, appends it and commits it (the
// WAL fsynced, storage.WithSyncCommit) before it reads the next, so an
// import holds one batch at a time whatever the size of its body: the
// batch's text, a parsed sample per line (40 bytes, its labels shared
// with the other samples of its series, see importSeriesCache) and the
// appender's rows (48 bytes each), about 4 MiB + 0.9 × 4 MiB for the
// text format's lines of about 100 bytes, plus the labels of the body's
// series (bounded, importSeriesCacheBytes). The 204 comes after the last
// batch's fsync.
//
// Samples of new series past storage.max_series are skipped and the rest
// stored: the answer is then 400 naming the first refused series and how
// many samples were refused, after the whole body was read and stored.
//
// Otherwise a batch is all or nothing: a bad line (a parse error, a series over a
// label limit or the index limit) refuses its batch, and the answer (400)
// names the line or the series and says what was stored before it:
// "lines 1-M (K samples) were stored; nothing from line M+1 on". A body
// of at most importBatchBytes is one batch, so it is stored whole or not
// at all. The same holds when reading fails part-way (the body limit, a
// client that leaves, 503 below storage.min_free_disk): the batches
// committed before it stay stored, and a sender that retries the whole
// body stores them again with the same values, which readers' duplicate
// rule collapses.
//
// Each batch is one Commit: one fsync of the WAL and, for samples older
// than the raw retention, one merge into the rollup tiers (which reads
// what the tiers hold for the batch's windows, rolls up each series of
// the batch and flushes the tiers), so the batch size sets how often a
// backfill pays for those: bench/tiers' 90-day backfill of 96 series took
// 8m22s with 256 KiB batches, 4m12s with 2 MiB ones and its series parsed
// once (load 2-4 before, 7-9 after; README, "Benchmark: tiers"). With
// many series a batch holds fewer samples of each, and the per-series
// work of the merge grows: hence 4 MiB.
const importBatchBytes = 4 << 20

// importSample is one parsed sample of an import body.
type importSample struct {
	lset labels.Labels // ser.lset
	ser  *importSeries
	t    int64
	v    float64
}

// importSeries is one series of an import body, parsed once however many
// samples it has: its labels (the extra labels applied), the ref the
// storage gave it (trusted by later Appends, as a scrape's refs are) and
// the outcome of the last label-limit check.
type importSeries struct {
	lset    labels.Labels
	ref     storage.SeriesRef
	limits  LabelLimits
	checked bool
	limit   error
	// batch and count are bySeries' scratch.
	batch uint64
	count int
}

// check is limits.check(lset), computed once per series and limits.
func (s *importSeries) check(limits LabelLimits) error {
	if !s.checked || s.limits != limits {
		s.limits, s.limit, s.checked = limits, limits.check(s.lset), true
	}
	return s.limit
}

// importSeriesCacheBytes bounds the series an import keeps between
// batches: past it (a body of very many series, each with few samples)
// the cache starts over, which costs the labels' parsing again, nothing
// else.
const importSeriesCacheBytes = 8 << 20

// importSeriesCache maps a series' text, as the parser returns it (the
// metric name and the label pairs as written), to its parsed series. An
// import body of historical data holds many samples per series, and
// parsing the labels, copying them and marshalling them for the storage
// was half of an import's CPU when done for every line.
type importSeriesCache struct {
	extra  labels.Labels
	byText map[string]*importSeries
	bytes  int
	lb     *labels.Builder
	// batch numbers bySeries' calls; grouped is its result.
	batch   uint64
	grouped []importSample
}

func newImportSeriesCache(extra labels.Labels) *importSeriesCache {
	return &importSeriesCache{extra: extra, byText: map[string]*importSeries{}, lb: labels.NewBuilder(labels.EmptyLabels())}
}

// series returns the series of text, parsing its labels with p only when
// text is new.
func (c *importSeriesCache) series(text []byte, p textparse.Parser) *importSeries {
	if s, ok := c.byText[string(text)]; ok {
		return s
	}
	if c.bytes > importSeriesCacheBytes {
		clear(c.byText)
		c.bytes = 0
	}
	var lset labels.Labels
	p.Labels(&lset)
	if !c.extra.IsEmpty() {
		c.lb.Reset(lset)
		c.extra.Range(func(l labels.Label) { c.lb.Set(l.Name, l.Value) })
		lset = c.lb.Labels()
	} else {
		lset = lset.Copy()
	}
	s := &importSeries{lset: lset}
	c.byText[string(text)] = s
	c.bytes += 2*len(text) + 64
	return s
}

// importPrometheus stores a body in Prometheus' text format (or OpenMetrics
// when the Content-Type says so), streamed in batches (see importBatchBytes).
// Each sample may carry a millisecond timestamp; samples without one get
// the time the request arrived. Query parameters extra_label=name=value add
// labels to every sample, as in VictoriaMetrics.
func (s *Server) importPrometheus(c echo.Context) error {
	req := c.Request()
	extra, err := parseExtraLabels(req.URL.Query()["extra_label"])
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	if err := s.ingestBlocked(); err != nil {
		return refuseImport(c, s.ingestRefusal(err, 0, "", importStored{}))
	}
	ct, openMetrics := importContentType(req.Header.Get("Content-Type"))
	now := time.Now().UnixMilli()
	// decodeBody (encoding.go), a middleware of the import routes, has
	// undone a gzip or snappy Content-Encoding and bounds the decoded size.
	lines := newLineBatches(req.Body, importBatchBytes)
	cache := newImportSeriesCache(extra)
	var (
		stored importStored
		meta   bool
		text   bool
	)
	for {
		batch, first, rerr := lines.next()
		// A read error cuts the batch at an unknown point: it is not
		// stored.
		if rerr == nil || errors.Is(rerr, io.EOF) && len(batch) > 0 {
			last := first + lines.count(batch) - 1
			text = text || len(bytes.TrimSpace(batch)) > 0
			if openMetrics {
				batch = endOpenMetrics(batch)
			}
			n, hasMeta, err := s.importBatch(req.Context(), batch, ct, first, last, cache, now, &stored)
			if err != nil {
				return refuseImport(c, err)
			}
			stored.lines, stored.samples = last, stored.samples+n
			meta = meta || hasMeta
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			r := readRefusal(rerr)
			r.msg += stored.note()
			return refuseImport(c, r)
		}
	}
	if stored.refused > 0 {
		return refuseImport(c, &importRefusal{http.StatusBadRequest, "bad_data",
			fmt.Sprintf("%d sample(s) of new series refused, the first: %s; the body's other %d samples were stored",
				stored.refused, stored.firstRefused, stored.samples)})
	}
	if stored.samples == 0 && text && !meta {
		return apiError(c, http.StatusBadRequest, "bad_data", "body has no samples")
	}
	return c.NoContent(http.StatusNoContent)
}

// importStored is what an import committed so far.
type importStored struct {
	lines, samples int
	// refused counts samples of new series past storage.max_series,
	// skipped; firstRefused is the first of their errors.
	refused      int
	firstRefused error
}

// note says in an error answer what was stored before the error.
func (st importStored) note() string {
	if st.lines == 0 {
		return "; nothing of this body was stored"
	}
	return fmt.Sprintf("; lines 1-%d (%d samples) were stored, nothing from line %d on", st.lines, st.samples, st.lines+1)
}

// importRefusal is an import's error answer.
type importRefusal struct {
	code     int
	typ, msg string
}

func (e *importRefusal) Error() string { return e.msg }

// importBatch parses, appends and commits one batch, lines first to last
// of the body. It returns the samples stored and whether the batch had
// metadata, or an *importRefusal saying what went wrong and what of the
// body was stored before (stored).
func (s *Server) importBatch(ctx context.Context, batch []byte, ct string, first, last int, cache *importSeriesCache, now int64, sp *importStored) (n int, meta bool, err error) {
	stored := *sp
	samples, md, err := cache.parse(batch, ct, now)
	if err != nil {
		var le *importLineError
		if errors.As(err, &le) {
			return 0, false, &importRefusal{http.StatusBadRequest, "bad_data", fmt.Sprintf("line %d: %s%s", first+le.line-1, le.err, stored.note())}
		}
		return 0, false, &importRefusal{http.StatusBadRequest, "bad_data", err.Error() + stored.note()}
	}
	limits := s.labelLimits()
	// Fsynced before the next batch is read: the 204 means all of them
	// are durable, and the sender may drop its copy.
	syncCtx := appstorage.WithSyncCommit(ctx)
	app := s.opts.Storage.AppenderV2(syncCtx)
	res := appendImport(app, cache.bySeries(samples), limits)
	if res.err != nil {
		_ = app.Rollback()
		// The answer names the body's first bad sample, and counts what
		// was refused before it, as appending in body order finds them.
		app = s.opts.Storage.AppenderV2(syncCtx)
		if again := appendImport(app, samples, limits); again.err != nil {
			res = again
		}
		_ = app.Rollback()
	}
	if res.refused > 0 {
		s.ingest.rejected.WithLabelValues(rejectMaxSeries).Add(float64(res.refused))
		if sp.refused += res.refused; sp.firstRefused == nil {
			sp.firstRefused = res.firstRefused
		}
	}
	if err := res.err; err != nil {
		smp := res.failed
		if r := s.ingestRefusal(err, len(samples), fmt.Sprintf("sample @%d in lines %d-%d", smp.t, first, last), stored); r != nil {
			return 0, false, r
		}
		return 0, false, &importRefusal{http.StatusBadRequest, "bad_data",
			fmt.Sprintf("sample %s @%d: %s%s", appstorage.SeriesPrefix(smp.lset), smp.t, err, stored.note())}
	}
	n = len(samples) - res.refused
	if r := s.commitImport(app, len(samples), stored); r != nil {
		return 0, false, r
	}
	for family, m := range md {
		s.opts.Storage.SetMetadata(family, m)
	}
	return n, len(md) > 0, nil
}

// appended is what appendImport did: the samples of new series past
// storage.max_series it skipped (refused, the first one's error), or the
// sample whose error stopped it (failed, err).
type appended struct {
	refused      int
	firstRefused error
	failed       importSample
	err          error
}

// appendImport appends samples to app, stopping at the first error other
// than the series limit's.
func appendImport(app storage.AppenderV2, samples []importSample, limits LabelLimits) appended {
	var res appended
	for _, smp := range samples {
		err := smp.ser.check(limits)
		if err == nil {
			var ref storage.SeriesRef
			if ref, err = app.Append(smp.ser.ref, smp.lset, 0, smp.t, smp.v, nil, nil, storage.AOptions{}); err == nil {
				smp.ser.ref = ref
			}
		}
		if errors.Is(err, appstorage.ErrSeriesLimit) {
			if res.refused++; res.firstRefused == nil {
				res.firstRefused = err
			}
			continue
		}
		if err != nil {
			res.failed, res.err = smp, err
			return res
		}
	}
	return res
}

// commitImport commits an import's batch of samples (fsynced where app
// came with storage.WithSyncCommit): nil, or the refusal of an ingest
// error (ingestRefusal), or 500.
func (s *Server) commitImport(app storage.AppenderV2, samples int, stored importStored) *importRefusal {
	err := app.Commit()
	if err == nil {
		return nil
	}
	if r := s.ingestRefusal(err, samples, "store samples", stored); r != nil {
		return r
	}
	return &importRefusal{http.StatusInternalServerError, "internal", "store samples: " + err.Error() + stored.note()}
}

// ingestRefusal is the answer to an Append or Commit error that is one
// of the ingest's own (a label limit, the index limit, a full disk),
// counted as rejected; nil for other errors.
func (s *Server) ingestRefusal(err error, samples int, what string, stored importStored) *importRefusal {
	code, reason := ingestError(err)
	if code == 0 {
		return nil
	}
	s.ingest.rejected.WithLabelValues(reason).Add(float64(samples))
	if code == http.StatusServiceUnavailable {
		return &importRefusal{code, "unavailable", err.Error() + stored.note() + ", retry later"}
	}
	if what != "" {
		what += ": "
	}
	return &importRefusal{code, "bad_data", what + err.Error() + stored.note()}
}

// readRefusal is the answer to an error reading an import's body: 413
// past web.max_request_body_bytes (limitBody, decodeBody), else 400.
func readRefusal(err error) *importRefusal {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &importRefusal{http.StatusRequestEntityTooLarge, "bad_data",
			fmt.Sprintf("request body exceeds the limit of %d bytes (web.max_request_body_bytes)", mbe.Limit)}
	}
	return &importRefusal{http.StatusBadRequest, "bad_data", "read body: " + err.Error()}
}

// refuseImport writes an import's error answer.
func refuseImport(c echo.Context, err error) error {
	var r *importRefusal
	if !errors.As(err, &r) {
		r = &importRefusal{http.StatusInternalServerError, "internal", err.Error()}
	}
	if r.code == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	return apiError(c, r.code, r.typ, r.msg)
}

// importContentType is the parser's content type: OpenMetrics when the
// request says so, else Prometheus' text format.
func importContentType(contentType string) (ct string, openMetrics bool) {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt == "application/openmetrics-text" {
		return contentType, true
	}
	return "text/plain", false
}

// endOpenMetrics ends a batch with the "# EOF" OpenMetrics requires at
// the end of a body, unless the batch has it (the body's last).
func endOpenMetrics(batch []byte) []byte {
	if bytes.HasSuffix(bytes.TrimRight(batch, " \t\r\n"), []byte("# EOF")) {
		return batch
	}
	if len(batch) > 0 && batch[len(batch)-1] != '\n' {
		batch = append(batch, '\n')
	}
	return append(batch, "# EOF\n"...)
}

// lineBatches cuts a body into batches of whole lines of at least size
// bytes (the last may be shorter; a line longer than size is one batch).
type lineBatches struct {
	r    *bufio.Reader
	buf  []byte
	size int
	read int // lines handed out in earlier batches
}

func newLineBatches(r io.Reader, size int) *lineBatches {
	return &lineBatches{r: bufio.NewReaderSize(r, 64<<10), size: size}
}

// next returns the next batch, the number (from 1) of its first line, and
// the error that ended reading (io.EOF at the end), which may come with a
// last batch. The batch is valid until the next call.
func (b *lineBatches) next() (batch []byte, first int, err error) {
	b.buf = b.buf[:0]
	first = b.read + 1
	for {
		chunk, err := b.r.ReadSlice('\n')
		b.buf = append(b.buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long line: read on to its end
		}
		if err != nil {
			b.read += b.count(b.buf)
			return b.buf, first, err
		}
		if len(b.buf) >= b.size {
			b.read += b.count(b.buf)
			return b.buf, first, nil
		}
	}
}

// count is the number of lines in batch, a last one without its newline
// included.
func (*lineBatches) count(batch []byte) int {
	n := bytes.Count(batch, []byte("\n"))
	if len(batch) > 0 && batch[len(batch)-1] != '\n' {
		n++
	}
	return n
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

// importLineError is a parse error at a line of the text parsed (from 1).
type importLineError struct {
	line int
	err  error
}

func (e *importLineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.err) }
func (e *importLineError) Unwrap() error { return e.err }

// parseImport parses a whole text (a body, or a batch of one). It returns
// the samples, the metadata of each family that has a TYPE, HELP or UNIT
// line, or an error naming the first bad line (*importLineError where the
// line is known).
func parseImport(body []byte, contentType string, extra labels.Labels, now int64) ([]importSample, map[string]metadata.Metadata, error) {
	return newImportSeriesCache(extra).parse(body, contentType, now)
}

// bySeries returns a batch's samples grouped by series, the series in
// the order of their first samples and each one's samples in body order:
// VictoriaMetrics' AddRows looks a row's series up by its name unless the
// row before it has the same name, so a batch in time order (one sample
// of every series, then the next) costs it a lookup per row and one
// grouped by series a lookup per series. Appending in this order stores
// the same samples: a batch is committed whole, and storage.max_series
// admits new series in the order they first appear, which is the same.
// The slice is the cache's, valid until the next call.
func (c *importSeriesCache) bySeries(samples []importSample) []importSample {
	c.batch++
	var order []*importSeries
	for _, smp := range samples {
		ser := smp.ser
		if ser.batch != c.batch {
			ser.batch, ser.count = c.batch, 0
			order = append(order, ser)
		}
		ser.count++
	}
	if len(order) == len(samples) {
		return samples // one sample per series: nothing to group
	}
	at := 0
	for _, ser := range order {
		ser.count, at = at, at+ser.count // now the series' next index
	}
	c.grouped = slices.Grow(c.grouped[:0], len(samples))[:len(samples)]
	for _, smp := range samples {
		c.grouped[smp.ser.count] = smp
		smp.ser.count++
	}
	return c.grouped
}

// parse is parseImport with the series of earlier batches of the body
// known.
func (c *importSeriesCache) parse(body []byte, contentType string, now int64) ([]importSample, map[string]metadata.Metadata, error) {
	ct, openMetrics := importContentType(contentType)
	if !openMetrics {
		if samples, ok := c.parseKnown(body, now); ok {
			return samples, map[string]metadata.Metadata{}, nil
		}
	}
	return c.parseText(body, ct, contentType, now)
}

// parseText is parse through Prometheus' text parser for ct.
func (c *importSeriesCache) parseText(body []byte, ct, contentType string, now int64) ([]importSample, map[string]metadata.Metadata, error) {
	p, err := textparse.New(body, ct, labels.NewSymbolTable(), textparse.ParserOptions{})
	if p == nil {
		return nil, nil, fmt.Errorf("content type %q: %w", contentType, err)
	}
	var (
		samples []importSample
		meta    = map[string]metadata.Metadata{}
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
			text, ts, v := p.Series()
			ser := c.series(text, p)
			t := now
			if ts != nil {
				t = *ts
			}
			samples = append(samples, importSample{lset: ser.lset, ser: ser, t: t, v: importValue(v)})
		case textparse.EntryHistogram:
			return nil, nil, errors.New("native histograms cannot be imported: the storage keeps float samples only")
		}
	}
	return samples, meta, nil
}

// importValue is the value stored for a parsed one.
func importValue(v float64) float64 {
	if math.IsNaN(v) && !value.IsStaleNaN(v) {
		// A NaN sample is stored as written; only the stale marker has
		// its own meaning.
		return math.NaN()
	}
	return v
}

// parseKnown parses a batch of Prometheus' text format without its parser
// when every line is a sample of a series the body named before, written
// "<series> <value>" or "<series> <value> <timestamp>" with single spaces,
// which is what a backfill sends after its first batch: the text parser's
// lexing of the labels, again for every line, was most of an import's CPU
// once the labels were parsed once per series. ok is false, and the batch
// must go through the parser, for anything else (a comment or metadata, a
// blank line, a series not seen yet, other spacing, a value the parser
// would not take, a last line without its newline), so the parser still
// decides every error and every line it would read differently. A series
// text that is in the cache was returned as one by the parser, which reads
// the same text followed by a space the same way, and the value and
// timestamp are read as it reads them (Prometheus' parseFloat: Go's
// ParseFloat without the formats Go 1.13 added; ParseInt of the digits).
func (c *importSeriesCache) parseKnown(body []byte, now int64) ([]importSample, bool) {
	if len(body) == 0 || body[len(body)-1] != '\n' {
		return nil, false
	}
	samples := make([]importSample, 0, bytes.Count(body, []byte("\n")))
	for rest := body; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		line := rest[:i]
		rest = rest[i+1:]
		text, val, ts, ok := splitSampleLine(line)
		if !ok {
			return nil, false
		}
		ser, known := c.byText[string(text)]
		if !known {
			return nil, false
		}
		if bytes.ContainsAny(val, "pP_") {
			return nil, false
		}
		v, err := strconv.ParseFloat(string(val), 64)
		if err != nil {
			return nil, false
		}
		if math.IsNaN(v) {
			v = math.Float64frombits(value.NormalNaN) // as the parser does
		}
		t := now
		if ts != nil {
			if t, err = strconv.ParseInt(string(ts), 10, 64); err != nil {
				return nil, false
			}
		}
		samples = append(samples, importSample{lset: ser.lset, ser: ser, t: t, v: importValue(v)})
	}
	return samples, true
}

// splitSampleLine cuts a line (without its newline) into the series text
// (up to the '}' that closes the labels, or up to the first space), the
// value and the timestamp (nil when there is none), each separated by one
// space; ok is false for any other shape (see parseKnown).
func splitSampleLine(line []byte) (text, val, ts []byte, ok bool) {
	if len(line) == 0 || line[0] == '#' {
		return nil, nil, nil, false
	}
	end := bytes.IndexByte(line, ' ')
	if brace := bytes.IndexByte(line, '{'); brace >= 0 && (end < 0 || brace < end) {
		end = -1
		quoted := false
		for i := brace + 1; i < len(line) && end < 0; i++ {
			switch c := line[i]; {
			case quoted && c == '\\':
				i++
			case c == '"':
				quoted = !quoted
			case !quoted && c == '}':
				end = i + 1
			}
		}
	}
	if end <= 0 || end >= len(line) || line[end] != ' ' {
		return nil, nil, nil, false
	}
	text = line[:end]
	val, ts, hasTS := bytes.Cut(line[end+1:], []byte(" "))
	if len(val) == 0 || bytes.ContainsAny(val, "{\t") {
		return nil, nil, nil, false
	}
	if !hasTS {
		return text, val, nil, true
	}
	if len(ts) == 0 {
		return nil, nil, nil, false
	}
	for _, d := range ts {
		if d < '0' || d > '9' {
			return nil, nil, nil, false
		}
	}
	return text, val, ts, true
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
			return &importLineError{line: i + 1, err: err}
		}
	}
	return perr
}
