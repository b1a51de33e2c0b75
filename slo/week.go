package slo

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Week is an ISO 8601 week: it starts on Monday, and week 1 of a year is
// the week with its first Thursday (so 2026 has a week 53, which ends on
// Sunday 2027-01-03).
type Week struct {
	Year, Num int
}

var weekRE = regexp.MustCompile(`^(\d{4})-W(\d{2})$`)

// ErrBadWeek is returned (wrapped) by ParseWeek.
var ErrBadWeek = errors.New("invalid ISO week")

// ParseWeek parses "2026-W48".
func ParseWeek(s string) (Week, error) {
	m := weekRE.FindStringSubmatch(s)
	if m == nil {
		return Week{}, fmt.Errorf("%w %q: want YYYY-Www, e.g. 2026-W48", ErrBadWeek, s)
	}
	y, _ := strconv.Atoi(m[1])
	n, _ := strconv.Atoi(m[2])
	if n < 1 || n > WeeksIn(y) {
		return Week{}, fmt.Errorf("%w %q: %d has weeks 1 to %d", ErrBadWeek, s, y, WeeksIn(y))
	}
	return Week{Year: y, Num: n}, nil
}

// WeeksIn returns the number of ISO weeks of year y: 52 or 53.
func WeeksIn(y int) int {
	_, n := time.Date(y, 12, 28, 12, 0, 0, 0, time.UTC).ISOWeek()
	return n
}

// WeekOf returns the ISO week that t falls in, in loc.
func WeekOf(t time.Time, loc *time.Location) Week {
	y, n := t.In(loc).ISOWeek()
	return Week{Year: y, Num: n}
}

func (w Week) String() string { return fmt.Sprintf("%04d-W%02d", w.Year, w.Num) }

// Start returns Monday 00:00 of the week in loc.
func (w Week) Start(loc *time.Location) time.Time {
	jan4 := time.Date(w.Year, 1, 4, 0, 0, 0, 0, loc)
	back := (int(jan4.Weekday()) + 6) % 7 // days since Monday
	return time.Date(w.Year, 1, 4-back+7*(w.Num-1), 0, 0, 0, 0, loc)
}

// End returns the start of the next week: the week is [Start, End). A
// week with a change to or from daylight saving time is 167 or 169 hours
// long.
func (w Week) End(loc *time.Location) time.Time { return w.Next().Start(loc) }

// Next returns the following week.
func (w Week) Next() Week {
	if w.Num >= WeeksIn(w.Year) {
		return Week{Year: w.Year + 1, Num: 1}
	}
	return Week{Year: w.Year, Num: w.Num + 1}
}

// Prev returns the week before.
func (w Week) Prev() Week {
	if w.Num <= 1 {
		return Week{Year: w.Year - 1, Num: WeeksIn(w.Year - 1)}
	}
	return Week{Year: w.Year, Num: w.Num - 1}
}

// Days returns the eight local midnights that bound the week's days; a
// day with a daylight saving change is 23 or 25 hours long.
func (w Week) Days(loc *time.Location) []time.Time {
	s := w.Start(loc)
	out := make([]time.Time, 8)
	for i := range out {
		out[i] = time.Date(s.Year(), s.Month(), s.Day()+i, 0, 0, 0, 0, loc)
	}
	return out
}
