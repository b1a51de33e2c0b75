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
	ss = addSpan(ss, span{lo: 10, hi: 20})
	ss = addSpan(ss, span{lo: 21, hi: 30})
	ss = addSpan(ss, span{lo: 0, hi: 5})
	require.Equal(t, []span{{lo: 0, hi: 5}, {lo: 10, hi: 30}}, ss)
	var added []span
	for i := range int64(3 * maxLateSpans) {
		s := span{lo: i * 100, hi: i*100 + 10 + i%7, settled: uint64(i)}
		added = append(added, s)
		ss = addSpan(ss, s)
	}
	require.LessOrEqual(t, len(ss), maxLateSpans)
	for _, a := range added {
		covered := false
		for _, s := range ss {
			covered = covered || (s.lo <= a.lo && a.hi <= s.hi && s.settled >= a.settled)
		}
		require.True(t, covered, "%v", a)
	}
}
