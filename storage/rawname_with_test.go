package storage

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// marshalRawNameWith gives the bytes of marshalRawName over the label set
// labels.Builder makes with the label set, wherever the label sorts.
func TestMarshalRawNameWithMatchesBuilder(t *testing.T) {
	sets := []labels.Labels{
		labels.FromStrings("__name__", "m"),
		labels.FromStrings("__name__", "m", "job", "x", "instance", "a:1"),
		labels.FromStrings("A", "upper sorts before __name__", "__name__", "m", "z", "1"),
		labels.FromStrings("__name__", "m", RollupLabel, "old", "job", "x"),
		labels.FromStrings("__a__", "1", "__name__", "m", "__z__", "2"),
		labels.FromStrings("job", "no name"),
		labels.FromStrings("__name__", "m", "empty", "", "job", "x"),
	}
	rng := rand.New(rand.NewPCG(1, 17))
	names := []string{"__name__", RollupLabel, "A", "Z", "_", "__", "__r", "__rollup", "__rollup__x", "a", "job", "le", "zz"}
	for range 500 {
		var kv []string
		for _, n := range names {
			if rng.IntN(2) == 0 {
				kv = append(kv, n, strings.Repeat("v", rng.IntN(3)))
			}
		}
		sets = append(sets, labels.FromStrings(kv...))
	}
	for _, ls := range sets {
		for _, agg := range []string{"max", "counter"} {
			want, wantErr := marshalRawName(nil, labels.NewBuilder(ls).Set(RollupLabel, agg).Labels())
			got, err := marshalRawNameWith(nil, ls, RollupLabel, agg)
			require.Equal(t, wantErr, err, "%s", ls)
			require.Equal(t, want, got, "%s + %s=%q", ls, RollupLabel, agg)
		}
	}
	long := labels.FromStrings("__name__", "m", "job", strings.Repeat("x", 1<<16))
	_, err := marshalRawNameWith(nil, long, RollupLabel, "max")
	require.ErrorIs(t, err, errLabelTooLong)
}
