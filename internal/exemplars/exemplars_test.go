package exemplars

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// sink takes samples and keeps nothing.
type sink struct{ commitErr error }

func (sink) Append(ref storage.SeriesRef, _ labels.Labels, _, _ int64, _ float64, _ *histogram.Histogram, _ *histogram.FloatHistogram, opts storage.AOptions) (storage.SeriesRef, error) {
	if len(opts.Exemplars) > 0 {
		panic("exemplars must not reach the sample storage")
	}
	return 1, nil
}
func (s sink) Commit() error { return s.commitErr }
func (sink) Rollback() error { return nil }

func selectAll(t *testing.T, s *Storage) []exemplar.QueryResult {
	t.Helper()
	q, err := s.ExemplarQuerier(context.Background())
	require.NoError(t, err)
	res, err := q.Select(0, 10_000, []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")})
	require.NoError(t, err)
	require.NotNil(t, res, "the API must answer [], never null")
	return res
}

func TestExemplarsHeldUntilCommit(t *testing.T) {
	s, err := New(Options{MaxExemplars: 10, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	ls := labels.FromStrings("__name__", "req_total", "job", "a")
	e := exemplar.Exemplar{Labels: labels.FromStrings("trace_id", "t1"), Value: 1, Ts: 1000, HasTs: true}

	app := s.Appender(sink{})
	_, err = app.Append(0, ls, 0, 1000, 1, nil, nil, storage.AOptions{Exemplars: []exemplar.Exemplar{e}})
	require.NoError(t, err)
	require.Empty(t, selectAll(t, s), "nothing before Commit")
	require.NoError(t, app.Rollback())
	require.Empty(t, selectAll(t, s), "a rollback drops them")

	app = s.Appender(sink{})
	_, err = app.Append(0, ls, 0, 1000, 1, nil, nil, storage.AOptions{Exemplars: []exemplar.Exemplar{e}})
	require.NoError(t, err)
	e2 := e
	e2.Ts, e2.Labels = 2000, labels.FromStrings("trace_id", "t2")
	_, err = app.(storage.ExemplarAppenderV2).AppendExemplars(0, ls, []exemplar.Exemplar{e2})
	require.NoError(t, err)
	require.NoError(t, app.Commit())
	res := selectAll(t, s)
	require.Len(t, res, 1)
	require.Len(t, res[0].Exemplars, 2)

	// A failed commit keeps none.
	app = s.Appender(sink{commitErr: storage.ErrOutOfBounds})
	_, err = app.Append(0, labels.FromStrings("__name__", "other"), 0, 1000, 1, nil, nil, storage.AOptions{Exemplars: []exemplar.Exemplar{e}})
	require.NoError(t, err)
	require.Error(t, app.Commit())
	require.Len(t, selectAll(t, s), 1)
}

func TestExemplarsDisabled(t *testing.T) {
	s, err := New(Options{MaxExemplars: 0})
	require.NoError(t, err)
	app := s.Appender(sink{})
	_, err = app.Append(0, labels.FromStrings("__name__", "x"), 0, 1, 1, nil, nil, storage.AOptions{Exemplars: []exemplar.Exemplar{{Value: 1, Ts: 1, HasTs: true}}})
	require.NoError(t, err)
	require.NoError(t, app.Commit())
	require.Empty(t, selectAll(t, s))
	s.Resize(5)
	app = s.Appender(sink{})
	_, err = app.Append(0, labels.FromStrings("__name__", "x"), 0, 1, 1, nil, nil, storage.AOptions{Exemplars: []exemplar.Exemplar{{Value: 1, Ts: 1, HasTs: true}}})
	require.NoError(t, err)
	require.NoError(t, app.Commit())
	require.Len(t, selectAll(t, s), 1)
}

// TestExemplarsRingGrows: the ring starts small and grows as exemplars
// fill it, keeping every one up to the bound and then the newest.
func TestExemplarsRingGrows(t *testing.T) {
	count := func(res []exemplar.QueryResult) (n int, oldest int64) {
		oldest = -1
		for _, r := range res {
			n += len(r.Exemplars)
			for _, e := range r.Exemplars {
				if oldest < 0 || e.Ts < oldest {
					oldest = e.Ts
				}
			}
		}
		return n, oldest
	}
	add := func(s *Storage, from, to int) {
		for i := from; i < to; i++ {
			ls := labels.FromStrings("__name__", "req_total", "series", string(rune('a'+i%7)))
			s.Add(ls, []exemplar.Exemplar{{Labels: labels.FromStrings("trace_id", "t"), Value: float64(i), Ts: int64(i + 1), HasTs: true}})
		}
	}

	s, err := New(Options{MaxExemplars: 1000})
	require.NoError(t, err)
	require.EqualValues(t, initialRing, s.size, "the ring starts small")
	add(s, 0, 900)
	n, oldest := count(selectAll(t, s))
	require.Equal(t, 900, n, "every exemplar kept while under the bound")
	require.EqualValues(t, 1, oldest)
	require.EqualValues(t, 1000, s.size, "grown to the bound, not past it")

	add(s, 900, 1500)
	n, oldest = count(selectAll(t, s))
	require.Equal(t, 1000, n)
	require.EqualValues(t, 501, oldest, "the newest kept")

	s.Resize(100)
	n, oldest = count(selectAll(t, s))
	require.Equal(t, 100, n, "a lower bound shrinks the ring at once")
	require.EqualValues(t, 1401, oldest)
}
