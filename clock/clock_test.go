package clock

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFake(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := NewFake(start)
	require.Equal(t, start, f.Now())
	require.Equal(t, start, f.Now(), "a fake clock stands still")
	f.Advance(90 * time.Second)
	require.Equal(t, start.Add(90*time.Second), f.Now())
	f.Set(start)
	require.Equal(t, start, f.Now())

	f.SetStep(time.Millisecond)
	require.Equal(t, start, f.Now())
	require.Equal(t, start.Add(time.Millisecond), f.Now())

	var c Clock = f
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = c.Now() })
	}
	wg.Wait()
	require.Equal(t, start.Add(10*time.Millisecond), f.Now(), "every concurrent read stepped once")
}

func TestReal(t *testing.T) {
	before := time.Now()
	got := Real{}.Now()
	require.False(t, got.Before(before))
}
