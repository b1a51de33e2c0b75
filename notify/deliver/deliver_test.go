package deliver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDoClassifiesAnswers(t *testing.T) {
	f := func(code int, wantErr, wantPermanent bool) {
		t.Helper()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			_, _ = w.Write([]byte("answer"))
		}))
		defer srv.Close()
		b, err := Do(context.Background(), nil, http.MethodPost, srv.URL+"/x?token=t0ken", JSON(), []byte("{}"))
		require.Equal(t, wantErr, err != nil, "%d: %v", code, err)
		require.Equal(t, wantPermanent, IsPermanent(err), "%d", code)
		if err == nil && code != http.StatusNoContent {
			require.Equal(t, "answer", string(b))
		}
		if err != nil {
			require.NotContains(t, err.Error(), "t0ken")
		}
	}
	f(200, false, false)
	f(204, false, false)
	f(400, true, true)
	f(404, true, true)
	f(408, true, false)
	f(429, true, false)
	f(500, true, false)
	f(503, true, false)
}

func TestUnreachableURLIsRedacted(t *testing.T) {
	_, err := Do(context.Background(), nil, http.MethodPost, "http://127.0.0.1:1/send?access_token=t0ken", nil, nil)
	require.Error(t, err)
	require.False(t, IsPermanent(err))
	require.NotContains(t, err.Error(), "t0ken")
	require.Contains(t, err.Error(), "<redacted url>")
}
