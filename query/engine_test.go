package query

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/stretchr/testify/require"
)

// TestLimits: a query needing more samples than MaxSamples fails with
// Prometheus' error, and one slower than Timeout is cancelled.
func TestLimits(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 1m
  metric{i="1"} 0+1x100
  metric{i="2"} 0+1x100
  metric{i="3"} 0+1x100
`)
	t.Cleanup(func() { st.Close() })

	eng := New(Options{MaxSamples: 100}, nil, nil)
	ctx := context.Background()
	// A range vector of 3 series × 61 samples is held at once.
	q, err := eng.NewInstantQuery(ctx, st, nil, `metric[1h]`, time.Unix(6000, 0))
	require.NoError(t, err)
	res := q.Exec(ctx)
	var tooMany promql.ErrTooManySamples
	require.ErrorAs(t, res.Err, &tooMany)

	eng = New(Options{MaxSamples: 1000}, nil, nil)
	q, err = eng.NewInstantQuery(ctx, st, nil, `sum(rate(metric[5m]))`, time.Unix(6000, 0))
	require.NoError(t, err)
	res = q.Exec(ctx)
	require.NoError(t, res.Err)
	v, err := res.Vector()
	require.NoError(t, err)
	require.InDelta(t, 3.0/60, v[0].F, 1e-12)

	eng = New(Options{Timeout: time.Nanosecond}, nil, nil)
	// The timeout runs from when the query is made: preparing it may
	// already fail.
	q, err = eng.NewInstantQuery(ctx, st, nil, `sum(rate(metric[1h]))`, time.Unix(6000, 0))
	if err == nil {
		err = q.Exec(ctx).Err
	}
	var timeout promql.ErrQueryTimeout
	require.True(t, errors.As(err, &timeout) || errors.Is(err, context.DeadlineExceeded), "got %v", err)
}

// TestConcurrencySlots: beyond MaxConcurrent a query waits, and gives up
// when its context ends.
func TestConcurrencySlots(t *testing.T) {
	s := newSlots(2)
	require.Equal(t, 2, s.GetMaxConcurrent())
	ctx := context.Background()
	_, err := s.Insert(ctx, "a")
	require.NoError(t, err)
	_, err = s.Insert(ctx, "b")
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = s.Insert(short, "c")
	var timeout promql.ErrQueryTimeout
	require.ErrorAs(t, err, &timeout, "a full queue is a timeout, which the API answers 503")

	s.Delete(0)
	_, err = s.Insert(ctx, "d")
	require.NoError(t, err, "a freed slot is reused")
}

func TestDefaults(t *testing.T) {
	e := New(Options{}, nil, nil)
	require.Equal(t, DefaultOptions(), e.Options())
	e.SetNoStepSubqueryInterval(30 * time.Second)
	require.Equal(t, int64(30000), e.subqueryStepMs.Load())
	e.SetNoStepSubqueryInterval(0)
	require.Equal(t, int64(30000), e.subqueryStepMs.Load(), "zero leaves the step as it was")
}
