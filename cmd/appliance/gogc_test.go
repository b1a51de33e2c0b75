package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// --gogc wins; without it $GOGC (applied by the runtime) stays; without
// either the appliance's default is set.
func TestApplyGOGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	require.Equal(t, 80, applyGOGC(80, ""))
	require.Equal(t, 80, debug.SetGCPercent(80))

	debug.SetGCPercent(70) // as the runtime would for GOGC=70
	require.Equal(t, 70, applyGOGC(gogcUnset, "70"))
	require.Equal(t, 70, debug.SetGCPercent(70))

	require.Equal(t, defaultGOGC, applyGOGC(gogcUnset, ""))
	require.Equal(t, defaultGOGC, debug.SetGCPercent(defaultGOGC))

	require.Equal(t, 20, applyGOGC(20, "70"), "the flag over $GOGC")
}
