package storagetest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, LeakOptions()...)
}

// TestReadBack: what is committed is read back at once, with timestamps,
// in time order, staleness markers bit for bit, and only the series the
// selector matches.
func TestReadBack(t *testing.T) {
	clk := clock.NewFake(time.Now().Truncate(time.Second))
	db := OpenOptions(t, storage.Options{Now: clk.Now})
	t0 := clk.Now().UnixMilli()
	app := db.AppenderV2(context.Background())
	up := labels.FromStrings("__name__", "up", "job", "vllm")
	other := labels.FromStrings("__name__", "up", "job", "tgi")
	for i, v := range []float64{1, 0, math.Float64frombits(value.StaleNaN)} {
		_, err := app.Append(0, up, 0, t0+int64(i)*1000, v, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	_, err := app.Append(0, other, 0, t0, 1, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, app.Commit())

	got := Select(t, db, `up{job="vllm"}`)
	require.Len(t, got, 1)
	ss := got[`{__name__="up", job="vllm"}`]
	require.Len(t, ss, 3)
	require.Equal(t, Sample{T: t0, V: 1}, ss[0])
	require.Equal(t, Sample{T: t0 + 1000, V: 0}, ss[1])
	require.Equal(t, t0+2000, ss[2].T)
	require.True(t, value.IsStaleNaN(ss[2].V))

	last := Last(t, db, `up`)
	require.Len(t, last, 2)
	require.Equal(t, 1.0, last[`{__name__="up", job="tgi"}`])
	require.Empty(t, Select(t, db, `down`))
}
