package rangecache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Late spans merge when they touch, and past maxLateSpans the closest
// neighbours merge: the spans only grow, so every late sample stays
// covered.
func TestLateSpans(t *testing.T) {
	var ss []span
	ss = addSpan(ss, span{10, 20})
	ss = addSpan(ss, span{21, 30})
	ss = addSpan(ss, span{0, 5})
	require.Equal(t, []span{{0, 5}, {10, 30}}, ss)
	var added []span
	for i := range int64(3 * maxLateSpans) {
		s := span{i * 100, i*100 + 10 + i%7}
		added = append(added, s)
		ss = addSpan(ss, s)
	}
	require.LessOrEqual(t, len(ss), maxLateSpans)
	for _, a := range added {
		covered := false
		for _, s := range ss {
			covered = covered || (s.lo <= a.lo && a.hi <= s.hi)
		}
		require.True(t, covered, "%v", a)
	}
}
