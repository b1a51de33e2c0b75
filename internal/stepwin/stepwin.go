// Package stepwin is the set of windows a range query reads a selector
// in: (t-Window, t] at t = First, First+Step, ... up to Last
// (milliseconds). Package query builds it from the engine's Select hints;
// package storage and query's iterator keep only the samples in it.
package stepwin

// Windows are the windows (t-Window, t] at t = First, First+Step, ...,
// up to Last. A nil *Windows keeps every sample.
type Windows struct {
	First, Step, Last, Window int64
}

// Keep reports whether a sample at t is in one of the windows.
func (w *Windows) Keep(t int64) bool {
	if w == nil {
		return true
	}
	if t > w.Last || t <= w.First-w.Window {
		return false
	}
	if t <= w.First {
		return true
	}
	// The first step at or after t.
	at := w.First + (t-w.First+w.Step-1)/w.Step*w.Step
	return at <= w.Last && at-t < w.Window
}
