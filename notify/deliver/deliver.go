// Package deliver sends the HTTP requests of the receivers: one place that
// classifies answers (accepted, retry later, rejected for good) and strips
// URLs from errors, since a receiver's URL often is its credential.
package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Timeout bounds one request when the context has no earlier deadline.
const Timeout = 15 * time.Second

// maxBody bounds how much of a receiver's answer is read.
const maxBody = 64 << 10

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that a retry cannot fix.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Redact removes the URL from errors of net/http, which print it whole
// ("Post \"https://oapi.dingtalk.com/robot/send?access_token=...\": ...").
func Redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s <redacted url>: %w", ue.Op, ue.Err)
	}
	return err
}

// Do sends the request and returns the response body of a 2xx answer. A
// 4xx answer other than 408 and 429 is a permanent error; everything else
// may be retried. The error never contains the URL or the body sent.
func Do(ctx context.Context, c *http.Client, method, u string, hdr http.Header, body []byte) ([]byte, error) {
	if c == nil {
		c = http.DefaultClient
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, Permanent(Redact(err))
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "appliance-notify")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, Redact(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode/100 == 2 {
		return b, nil
	}
	snippet := string(b)
	if len(snippet) > 200 {
		snippet = snippet[:200]
	}
	err = fmt.Errorf("unexpected status %s: %q", resp.Status, snippet)
	if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
		return nil, Permanent(err)
	}
	return nil, err
}

// JSON is the header of a JSON body.
func JSON() http.Header { return http.Header{"Content-Type": {"application/json"}} }

// PostJSON posts v as JSON to u with Do. A v that does not marshal is a
// permanent failure: sending it again cannot help.
func PostJSON(ctx context.Context, c *http.Client, u string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, Permanent(err)
	}
	return Do(ctx, c, http.MethodPost, u, JSON(), body)
}
