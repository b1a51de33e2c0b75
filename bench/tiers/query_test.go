package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQueryWindow(t *testing.T) {
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for rng, want := range map[time.Duration]time.Duration{
		time.Hour: 15 * time.Second, day: 3 * time.Minute,
		7 * day: 20 * time.Minute, 30 * day: 85 * time.Minute, 90 * day: 260 * time.Minute,
	} {
		start, e, step := queryWindow(end, rng)
		require.Equal(t, end, e)
		require.Equal(t, end.Add(-rng), start)
		require.Equal(t, want, step, "%s", rng)
	}
	require.Equal(t, []time.Duration{time.Hour, day, 7 * day}, queryRanges(7))
	require.Equal(t, "24h", rangeName(day))
	require.Equal(t, "90d", rangeName(90*day))
}
