package slo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWeekBounds(t *testing.T) {
	f := func(week, zone, start string, hours float64) {
		t.Helper()
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		w, err := ParseWeek(week)
		require.NoError(t, err)
		require.Equal(t, week, w.String())
		require.Equal(t, start, w.Start(loc).Format(time.RFC3339))
		require.Equal(t, hours, w.End(loc).Sub(w.Start(loc)).Hours())
		require.Equal(t, w, WeekOf(w.Start(loc), loc))
		require.Equal(t, w, WeekOf(w.End(loc).Add(-time.Nanosecond), loc))
		require.Equal(t, w, w.Prev().Next())
		days := w.Days(loc)
		require.Len(t, days, 8)
		require.Equal(t, w.End(loc), days[7])
	}
	f("2026-W48", "Asia/Shanghai", "2026-11-23T00:00:00+08:00", 168)
	f("2026-W48", "UTC", "2026-11-23T00:00:00Z", 168)
	// Europe/Berlin goes to summer time on 2026-03-29 and back on 2026-10-25.
	f("2026-W13", "Europe/Berlin", "2026-03-23T00:00:00+01:00", 167)
	f("2026-W43", "Europe/Berlin", "2026-10-19T00:00:00+02:00", 169)
	// 2026 has 53 weeks; W53 runs into 2027.
	f("2026-W53", "Asia/Shanghai", "2026-12-28T00:00:00+08:00", 168)
	require.Equal(t, 53, WeeksIn(2026))
	require.Equal(t, 52, WeeksIn(2027))
	require.Equal(t, Week{2027, 1}, Week{2026, 53}.Next())
	require.Equal(t, Week{2026, 53}, Week{2027, 1}.Prev())
	require.Equal(t, "2027-01-04T00:00:00+08:00", Week{2026, 53}.End(time.FixedZone("CST", 8*3600)).Format(time.RFC3339))

	loc, _ := time.LoadLocation("Europe/Berlin")
	days := Week{2026, 13}.Days(loc)
	require.Equal(t, 23.0, days[7].Sub(days[6]).Hours(), "Sunday 2026-03-29 is 23 hours long in Berlin")

	for _, bad := range []string{"2026-W54", "2027-W53", "2026-48", "2026-W00"} {
		_, err := ParseWeek(bad)
		require.ErrorIs(t, err, ErrBadWeek, bad)
	}
}
