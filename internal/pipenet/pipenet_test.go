package pipenet

import (
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestServeOnTheBubblesClock: a handler that sleeps a second answers after
// exactly a second of the bubble's clock, and a client timeout fires at
// exactly its time.
func TestServeOnTheBubblesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, err := time.ParseDuration(r.URL.Query().Get("sleep"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			select {
			case <-time.After(d):
				_, _ = io.WriteString(w, "slept")
			case <-r.Context().Done():
			}
		}))
		client := srv.Client()

		start := time.Now()
		resp, err := client.Get("http://any.test/?sleep=1s")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, "slept", string(body))
		require.Equal(t, time.Second, time.Since(start))

		client.Timeout = 250 * time.Millisecond
		start = time.Now()
		_, err = client.Get("http://any.test/?sleep=1h")
		require.Error(t, err)
		require.Equal(t, 250*time.Millisecond, time.Since(start))
	})
}

func TestListenerClose(t *testing.T) {
	ln := Listen()
	require.NoError(t, ln.Close())
	require.NoError(t, ln.Close(), "twice")
	_, err := ln.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = ln.Dial(t.Context(), "tcp", "x:80")
	require.ErrorIs(t, err, net.ErrClosed)
}
