package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQueryWindow(t *testing.T) {
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for days, want := range map[int]time.Duration{7: 20 * time.Minute, 30: 85 * time.Minute, 90: 260 * time.Minute} {
		start, e, step := queryWindow(end, days)
		require.Equal(t, end, e)
		require.Equal(t, end.Add(-time.Duration(days)*24*time.Hour), start)
		require.Equal(t, want, step, "%d days", days)
	}
}
