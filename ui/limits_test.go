package ui

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// TestBodyLimitOnDecodedPath: an encoded or unclean path to an ingest
// route gets the ingest limit, other routes the smaller one.
func TestBodyLimitOnDecodedPath(t *testing.T) {
	ts := newTestServer(t, func(o *Options) { o.MaxRequestBodyBytes = 1024; o.OtherBodyBytes = 4096 })
	big := bytes.Repeat([]byte("x 1\n"), 1000)
	for _, p := range []string{"/api/v1/write", "/api/v1/%77rite", "/api/v1/%77%72%69%74%65", "/api/v1/import/%70rometheus"} {
		req := httptest.NewRequest(http.MethodPost, p, bytes.NewReader(big))
		code, out := ts.do(req)
		require.Equal(t, http.StatusRequestEntityTooLarge, code, "%s: %s", p, out)
	}
	huge := bytes.Repeat([]byte("x"), 5000)
	req := httptest.NewRequest(http.MethodPost, "/api/v2/silences", bytes.NewReader(huge))
	code, _ := ts.do(req)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, "other routes have a limit too")
}

func hashOf(t *testing.T, pass string, cost int) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pass), cost)
	require.NoError(t, err)
	return string(h)
}

// TestApplyWebRotatesUsers: after ApplyWeb the old password is refused on
// the next request, though it was remembered; removing every user turns
// auth off.
func TestApplyWebRotatesUsers(t *testing.T) {
	ts := newTestServer(t, func(o *Options) {
		o.BasicAuthUsers = map[string]string{"admin": hashOf(t, "old", bcrypt.MinCost)}
	})
	get := func(user, pass string) int {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/status/buildinfo", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		code, _ := ts.do(req)
		return code
	}
	require.Equal(t, http.StatusOK, get("admin", "old"))
	require.Equal(t, http.StatusOK, get("admin", "old"), "remembered")
	require.Equal(t, http.StatusUnauthorized, get("admin", "new"))

	next, err := ts.srv.PrepareWeb(WebSettings{BasicAuthUsers: map[string]string{"admin": hashOf(t, "new", bcrypt.MinCost)}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, get("admin", "old"), "prepare changes nothing")
	ts.srv.ApplyWeb(next)
	require.Equal(t, http.StatusUnauthorized, get("admin", "old"))
	require.Equal(t, http.StatusOK, get("admin", "new"))

	next, err = ts.srv.PrepareWeb(WebSettings{})
	require.NoError(t, err)
	ts.srv.ApplyWeb(next)
	require.Equal(t, http.StatusOK, get("", ""), "no users: auth off")
}

// TestDummyHashAtConfiguredCost: unknown users are checked against a hash
// of the highest configured cost.
func TestDummyHashAtConfiguredCost(t *testing.T) {
	st, err := newAuthState(map[string]string{"a": hashOf(t, "x", 5), "b": hashOf(t, "y", 6)})
	require.NoError(t, err)
	cost, err := bcrypt.Cost(st.dummy)
	require.NoError(t, err)
	require.Equal(t, 6, cost)
	_, err = newAuthState(map[string]string{"a": "plain"})
	require.Error(t, err)
}

// TestConnLimiterClosesIdle: with every slot held by idle connections, a
// new client is served; one idle connection was closed for it.
func TestConnLimiterClosesIdle(t *testing.T) {
	ts := newTestServer(t, func(o *Options) {
		o.ListenAddress = "127.0.0.1:0"
		o.MaxConnections = 4
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	addr := ts.srv.Addr().String()
	var idle []net.Conn
	for range 10 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		idle = append(idle, c)
		defer c.Close()
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for range 5 {
		resp, err := client.Get("http://" + addr + "/-/healthy")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	// The idle connections closed by the server read EOF; at most 4 are
	// still open.
	open := 0
	for _, c := range idle {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
		if _, err := c.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "timeout") {
			open++
		}
	}
	require.LessOrEqual(t, open, 4, fmt.Sprintf("%d idle connections still open", open))
}

func TestConnectionCap(t *testing.T) {
	require.Equal(t, 512, connectionCap(512, 0))
	require.Equal(t, 512, connectionCap(512, 1024))
	require.Equal(t, 128, connectionCap(512, 256))
	require.Equal(t, 512, connectionCap(512, 1<<20))
}
