package ui

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/golang/snappy"
	"github.com/labstack/echo/v4"
)

// snappyStreamMagic opens a body in snappy's framed (stream) format;
// without it a snappy body is one block, as remote write sends.
var snappyStreamMagic = []byte("\xff\x06\x00\x00sNaPpY")

// decodeBody accepts import bodies sent with Content-Encoding gzip or
// snappy (block or framed), as VictoriaMetrics' and Prometheus' clients
// send them. The decoded body is bounded by web.max_request_body_bytes
// as the plain one is (limitBody bounds the encoded bytes before), so a
// small compressed body cannot expand past the limit: reading past it
// fails with *http.MaxBytesError, which the import answers 413.
func (s *Server) decodeBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding")))
		limit := s.opts.MaxRequestBodyBytes
		var body io.Reader
		switch enc {
		case "", "identity":
			return next(c)
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				return encodedBodyError(c, "gzip", err)
			}
			defer func() { _ = zr.Close() }()
			body = zr
		case "snappy":
			raw, err := io.ReadAll(req.Body)
			if err != nil {
				return encodedBodyError(c, "snappy", err)
			}
			if bytes.HasPrefix(raw, snappyStreamMagic) {
				body = snappy.NewReader(bytes.NewReader(raw))
				break
			}
			n, err := snappy.DecodedLen(raw)
			if err != nil {
				return encodedBodyError(c, "snappy", err)
			}
			if int64(n) > limit {
				return encodedBodyError(c, "snappy", &http.MaxBytesError{Limit: limit})
			}
			dec, err := snappy.Decode(nil, raw)
			if err != nil {
				return encodedBodyError(c, "snappy", err)
			}
			body = bytes.NewReader(dec)
		default:
			return apiError(c, http.StatusUnsupportedMediaType, "bad_data",
				fmt.Sprintf("Content-Encoding %q is not supported: send the body plain, gzip or snappy", enc))
		}
		req.Body = &decodedBody{r: body, closer: req.Body, left: limit, limit: limit}
		req.Header.Del("Content-Encoding")
		req.ContentLength = -1
		return next(c)
	}
}

// encodedBodyError answers a body that cannot be decoded: 413 past the
// limit, else 400.
func encodedBodyError(c echo.Context, enc string, err error) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return refuseImport(c, readRefusal(err))
	}
	return apiError(c, http.StatusBadRequest, "bad_data", fmt.Sprintf("decode %s body: %v", enc, err))
}

// decodedBody is a decoded request body bounded to limit bytes.
type decodedBody struct {
	r      io.Reader
	closer io.Closer
	left   int64
	limit  int64
}

func (d *decodedBody) Read(p []byte) (int, error) {
	if d.left <= 0 {
		// One byte more tells a body of exactly limit bytes from a longer one.
		var one [1]byte
		if n, _ := d.r.Read(one[:]); n > 0 {
			return 0, &http.MaxBytesError{Limit: d.limit}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.r.Read(p)
	d.left -= int64(n)
	return n, err
}

func (d *decodedBody) Close() error { return d.closer.Close() }
