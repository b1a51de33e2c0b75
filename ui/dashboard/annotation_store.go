package dashboard

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	bolt "go.etcd.io/bbolt"
)

// TagRelease is the tag of an annotation that marks a release; the weekly
// report lists these, with the P95 before and after.
const TagRelease = "release"

// Limits on a stored annotation, so that a deploy script's mistake cannot
// fill the state file.
const (
	maxAnnotationText   = 1024
	maxAnnotationTags   = 16
	maxAnnotationLabels = 32
	maxAnnotationValue  = 256
)

// ErrBadAnnotation is returned (wrapped, with the reason) for an
// annotation Validate refuses.
var ErrBadAnnotation = errors.New("invalid annotation")

var (
	bucketAnnotations    = []byte("annotations")     // 8-byte ms time + 8-byte sequence → JSON Annotation
	bucketAnnotationMeta = []byte("annotation_meta") // keyLongestSpan → 8-byte ms
	keyLongestSpan       = []byte("longest_span_ms") // the longest End−Time stored, so List knows how early to start
)

// AnnotationStore keeps annotations in the state file (bucket
// annotations): those posted to /api/v1/appliance/annotations and the
// releases the ReleaseDetector records. Methods are safe for concurrent
// use (bbolt serialises them).
type AnnotationStore struct {
	db *bolt.DB
}

// NewAnnotationStore opens the store in db, creating its buckets.
func NewAnnotationStore(db *bolt.DB) (*AnnotationStore, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketAnnotations, bucketAnnotationMeta, bucketReleaseTargets} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketAnnotationMeta).Get(keyLongestSpan) != nil {
			return nil
		}
		// A state file from before the meta bucket: measure once.
		return tx.Bucket(bucketAnnotations).ForEach(func(k, v []byte) error {
			var a Annotation
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("annotation %x: %w", k, err)
			}
			return noteSpan(tx, a)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("open annotation store: %w", err)
	}
	return &AnnotationStore{db: db}, nil
}

// Validate checks an annotation to be stored and fills its defaults: End
// is Time when unset, Kind is release when the tags name one (else
// "annotation"), Labels is never nil.
func (a *Annotation) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadAnnotation, fmt.Sprintf(format, args...))
	}
	if a.Time <= 0 || math.IsNaN(a.Time) || math.IsInf(a.Time, 0) {
		return bad("time is required: Unix seconds or RFC 3339, e.g. 1764590400 or \"2026-12-01T12:00:00Z\"")
	}
	if a.End == 0 {
		a.End = a.Time
	}
	if math.IsNaN(a.End) || math.IsInf(a.End, 0) || a.End < a.Time {
		return bad("end must not be before time")
	}
	a.Text = strings.TrimSpace(a.Text)
	switch {
	case a.Text == "":
		return bad("text is required, e.g. \"deploy llama v2.1\"")
	case len(a.Text) > maxAnnotationText:
		return bad("text is %d bytes; at most %d", len(a.Text), maxAnnotationText)
	case !utf8.ValidString(a.Text):
		return bad("text is not UTF-8")
	}
	if len(a.Tags) > maxAnnotationTags {
		return bad("%d tags; at most %d", len(a.Tags), maxAnnotationTags)
	}
	for _, t := range a.Tags {
		if t == "" || len(t) > 64 || strings.ContainsAny(t, " \t\n,") || !utf8.ValidString(t) {
			return bad("tag %q: a tag is 1 to 64 characters without spaces or commas", t)
		}
	}
	if len(a.Labels) > maxAnnotationLabels {
		return bad("%d labels; at most %d", len(a.Labels), maxAnnotationLabels)
	}
	for k, v := range a.Labels {
		if !model.LegacyValidation.IsValidLabelName(k) || strings.HasPrefix(k, "__") {
			return bad("label name %q is not a label name", k)
		}
		if len(v) > maxAnnotationValue || !utf8.ValidString(v) {
			return bad("label %s: the value must be UTF-8, at most %d bytes", k, maxAnnotationValue)
		}
	}
	if a.Labels == nil {
		a.Labels = map[string]string{}
	}
	switch {
	case a.Kind != "" && a.Kind != KindRelease && a.Kind != KindNote:
		return bad("kind %q: want release or note (the other kinds are computed)", a.Kind)
	case slices.Contains(a.Tags, TagRelease):
		a.Kind = KindRelease
	case a.Kind == KindRelease:
		a.Tags = append(a.Tags, TagRelease)
	default:
		a.Kind = KindNote
	}
	return nil
}

func annotationKey(t float64, seq uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, uint64(int64(math.Round(t*1000))))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}

// Add validates and stores a; it returns the stored annotation with its
// ID.
func (s *AnnotationStore) Add(a Annotation) (Annotation, error) {
	if err := a.Validate(); err != nil {
		return Annotation{}, err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return putAnnotation(tx, &a)
	})
	if err != nil {
		return Annotation{}, fmt.Errorf("store annotation: %w", err)
	}
	return a, nil
}

func putAnnotation(tx *bolt.Tx, a *Annotation) error {
	b := tx.Bucket(bucketAnnotations)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	a.ID = fmt.Sprintf("%d", seq)
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := noteSpan(tx, *a); err != nil {
		return err
	}
	return b.Put(annotationKey(a.Time, seq), v)
}

// noteSpan raises the stored longest span to a's when a is longer.
func noteSpan(tx *bolt.Tx, a Annotation) error {
	span := uint64(max(0, math.Round((a.End-a.Time)*1000)))
	if stored := tx.Bucket(bucketAnnotationMeta).Get(keyLongestSpan); stored != nil && span <= longestSpan(tx) {
		return nil
	}
	return tx.Bucket(bucketAnnotationMeta).Put(keyLongestSpan, binary.BigEndian.AppendUint64(nil, span))
}

// longestSpan is the longest End−Time of a stored annotation, in ms.
func longestSpan(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketAnnotationMeta).Get(keyLongestSpan)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// List returns the stored annotations that overlap [from, to] and carry
// every tag in tags, sorted by time.
func (s *AnnotationStore) List(from, to time.Time, tags ...string) ([]Annotation, error) {
	lo, hi := float64(from.UnixMilli())/1000, float64(to.UnixMilli())/1000
	out := []Annotation{}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAnnotations).Cursor()
		// A span may start before from: the scan starts the longest
		// stored span early and checks each end.
		start := max(0, lo-float64(longestSpan(tx))/1000)
		for k, v := c.Seek(annotationKey(start, 0)); k != nil; k, v = c.Next() {
			var a Annotation
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("annotation %x: %w", k, err)
			}
			if a.Time > hi {
				break
			}
			if a.End < lo || !hasTags(a.Tags, tags) {
				continue
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list annotations: %w", err)
	}
	SortAnnotations(out)
	return out, nil
}

func hasTags(have, want []string) bool {
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// SortAnnotations sorts by time, then kind, then text.
func SortAnnotations(as []Annotation) {
	sort.SliceStable(as, func(i, j int) bool {
		if as[i].Time != as[j].Time {
			return as[i].Time < as[j].Time
		}
		if as[i].Kind != as[j].Kind {
			return as[i].Kind < as[j].Kind
		}
		return as[i].Text < as[j].Text
	})
}

// FilterTags keeps the annotations that carry every tag in tags.
func FilterTags(as []Annotation, tags []string) []Annotation {
	if len(tags) == 0 {
		return as
	}
	out := []Annotation{}
	for _, a := range as {
		if hasTags(a.Tags, tags) {
			out = append(out, a)
		}
	}
	return out
}
