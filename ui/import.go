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
// batch's text and its parsed samples, about 16 times the text (a
// Prometheus label set and a sample per line, and the appender's rows),
// so about 4 MiB. The 204 comes after the last batch's fsync.
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
const importBatchBytes = 256 << 10

// importSample is one parsed sample of an import body.
type importSample struct {
	lset labels.Labels
	t    int64
	v    float64
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
			n, hasMeta, err := s.importBatch(req.Context(), batch, ct, first, last, extra, now, &stored)
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
func (s *Server) importBatch(ctx context.Context, batch []byte, ct string, first, last int, extra labels.Labels, now int64, sp *importStored) (n int, meta bool, err error) {
	stored := *sp
	samples, md, err := parseImport(batch, ct, extra, now)
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
	app := s.opts.Storage.AppenderV2(appstorage.WithSyncCommit(ctx))
	for _, smp := range samples {
		err := limits.check(smp.lset)
		if err == nil {
			_, err = app.Append(0, smp.lset, 0, smp.t, smp.v, nil, nil, storage.AOptions{})
		}
		if errors.Is(err, appstorage.ErrSeriesLimit) {
			s.ingest.rejected.WithLabelValues(rejectMaxSeries).Inc()
			if sp.refused++; sp.firstRefused == nil {
				sp.firstRefused = err
			}
			n--
			continue
		}
		if err != nil {
			_ = app.Rollback()
			if r := s.ingestRefusal(err, len(samples), fmt.Sprintf("sample @%d in lines %d-%d", smp.t, first, last), stored); r != nil {
				return 0, false, r
			}
			return 0, false, &importRefusal{http.StatusBadRequest, "bad_data",
				fmt.Sprintf("sample %s @%d: %s%s", appstorage.SeriesPrefix(smp.lset), smp.t, err, stored.note())}
		}
	}
	if r := s.commitImport(app, len(samples), stored); r != nil {
		return 0, false, r
	}
	for family, m := range md {
		s.opts.Storage.SetMetadata(family, m)
	}
	return n + len(samples), len(md) > 0, nil
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
	ct, _ := importContentType(contentType)
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
			return &importLineError{line: i + 1, err: err}
		}
	}
	return perr
}
