package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/storage/storagetest"
)

// TestAnnotationListLongSpans: a span that starts long before the asked
// window and ends inside it is listed, also from a state file written
// before the store kept its longest span.
func TestAnnotationListLongSpans(t *testing.T) {
	db := storagetest.Open(t)
	store, err := NewAnnotationStore(db.State())
	require.NoError(t, err)
	const day = 86400.0
	t0 := 1764590400.0
	_, err = store.Add(Annotation{Time: t0, End: t0 + 10*day, Text: "maintenance window", Tags: []string{"maint"}})
	require.NoError(t, err)
	_, err = store.Add(Annotation{Time: t0 + 9*day, Text: "deploy v2", Tags: []string{TagRelease}})
	require.NoError(t, err)

	at := func(s float64) time.Time { return time.UnixMilli(int64(s * 1000)) }
	texts := func(from, to float64) []string {
		t.Helper()
		list, err := store.List(at(from), at(to))
		require.NoError(t, err)
		var out []string
		for _, a := range list {
			out = append(out, a.Text)
		}
		return out
	}
	require.Equal(t, []string{"maintenance window"}, texts(t0+5*day, t0+6*day))
	require.Equal(t, []string{"maintenance window", "deploy v2"}, texts(t0+8*day, t0+12*day))
	require.Empty(t, texts(t0+11*day, t0+12*day))

	// A state file from before annotation_meta: the span is measured on open.
	require.NoError(t, db.State().Update(func(tx *bolt.Tx) error {
		return tx.DeleteBucket(bucketAnnotationMeta)
	}))
	store, err = NewAnnotationStore(db.State())
	require.NoError(t, err)
	require.Equal(t, []string{"maintenance window"}, texts(t0+5*day, t0+6*day))
}
