package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Fake is a clock that moves only when told to. It is safe for concurrent
// use; the zero value is not usable, call NewFake.
type Fake struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// NewFake returns a Fake that reads start until it is moved.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time, then moves it on by the step set with
// SetStep (none by default).
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.now
	f.now = f.now.Add(f.step)
	return t
}

// Advance moves the time on by d (back, if d is negative).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// Set moves the time to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
}

// SetStep makes every later Now move the time on by d after reading it,
// for code that must see time pass between two reads (timestamps that must
// differ) without a test driving each step.
func (f *Fake) SetStep(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step = d
}
