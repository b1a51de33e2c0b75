package downsample

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/aiserve/appliance/storage"
	"go.etcd.io/bbolt"
)

// bucket is the package's bucket in the state file:
//
//	watermark/<tier>  8 bytes, big-endian ms: every window of the tier
//	                  that ends at or before it is rolled up and on disk
//	dirty/<tier>      16 bytes per range, [start, end) ms, sorted and
//	                  disjoint: windows below the watermark that received
//	                  late samples and must be rolled up again
var bucket = []byte("downsample")

func watermarkKey(t storage.Tier) []byte { return []byte("watermark/" + t.String()) }
func dirtyKey(t storage.Tier) []byte     { return []byte("dirty/" + t.String()) }

// span is a time range [start, end) in milliseconds.
type span struct{ start, end int64 }

func loadWatermark(tx *bbolt.Tx, t storage.Tier) (int64, bool) {
	b := tx.Bucket(bucket)
	if b == nil {
		return 0, false
	}
	v := b.Get(watermarkKey(t))
	if len(v) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

func saveWatermark(tx *bbolt.Tx, t storage.Tier, ms int64) error {
	b, err := tx.CreateBucketIfNotExists(bucket)
	if err != nil {
		return err
	}
	return b.Put(watermarkKey(t), binary.BigEndian.AppendUint64(nil, uint64(ms)))
}

func loadDirty(tx *bbolt.Tx, t storage.Tier) ([]span, error) {
	b := tx.Bucket(bucket)
	if b == nil {
		return nil, nil
	}
	v := b.Get(dirtyKey(t))
	if len(v)%16 != 0 {
		return nil, fmt.Errorf("corrupt dirty list of tier %s (%d bytes)", t, len(v))
	}
	out := make([]span, 0, len(v)/16)
	for i := 0; i < len(v); i += 16 {
		out = append(out, span{int64(binary.BigEndian.Uint64(v[i:])), int64(binary.BigEndian.Uint64(v[i+8:]))})
	}
	return out, nil
}

func saveDirty(tx *bbolt.Tx, t storage.Tier, spans []span) error {
	b, err := tx.CreateBucketIfNotExists(bucket)
	if err != nil {
		return err
	}
	if len(spans) == 0 {
		return b.Delete(dirtyKey(t))
	}
	v := make([]byte, 0, 16*len(spans))
	for _, s := range spans {
		v = binary.BigEndian.AppendUint64(v, uint64(s.start))
		v = binary.BigEndian.AppendUint64(v, uint64(s.end))
	}
	return b.Put(dirtyKey(t), v)
}

// addSpan merges s into a sorted list of disjoint spans.
func addSpan(spans []span, s span) []span {
	if s.start >= s.end {
		return spans
	}
	spans = append(spans, s)
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	out := spans[:1]
	for _, x := range spans[1:] {
		last := &out[len(out)-1]
		if x.start <= last.end {
			last.end = max(last.end, x.end)
			continue
		}
		out = append(out, x)
	}
	return out
}

// removeSpan removes s from a sorted list of disjoint spans.
func removeSpan(spans []span, s span) []span {
	var out []span
	for _, x := range spans {
		if x.end <= s.start || x.start >= s.end {
			out = append(out, x)
			continue
		}
		if x.start < s.start {
			out = append(out, span{x.start, s.start})
		}
		if x.end > s.end {
			out = append(out, span{s.end, x.end})
		}
	}
	return out
}
