package storage

import (
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
)

// ErrInvalidSeries is wrapped by every error Append returns for a label
// set the store cannot hold (too long for the index, a label over 64 KiB,
// no labels). The sample is refused before anything is acknowledged; the
// HTTP ingest answers 400, a scrape fails with the error.
var ErrInvalidSeries = errors.New("invalid series")

// MaxIndexedSeriesBytes is the largest label set the index holds, in
// VictoriaMetrics' marshalled form (each name and value plus a separator,
// the bytes 0, 1 and 2 escaped to two). VictoriaMetrics' index
// (lib/mergeset) skips an item over 64 KiB with only a log line, "skipping
// adding too long item to indexdb", and its items add a prefix, the
// series ID and a date to the name; 64 bytes covers those.
const MaxIndexedSeriesBytes = 64*1024 - 64

// seriesPrefixLen is how much of a refused series an error shows.
const seriesPrefixLen = 120

// indexedSize is the size of ls in VictoriaMetrics' marshalled metric
// name (lib/storage MetricName.Marshal), which its index items carry.
func indexedSize(ls labels.Labels) int {
	n := 0
	escaped := func(s string) int {
		k := len(s) + 1 // separator
		for i := 0; i < len(s); i++ {
			if s[i] <= 2 {
				k++
			}
		}
		return k
	}
	ls.Range(func(l labels.Label) {
		if l.Value == "" {
			return
		}
		if l.Name != labels.MetricName {
			n += escaped(l.Name)
		}
		n += escaped(l.Value)
	})
	return n
}

// checkIndexedSize refuses a label set the index cannot hold.
func checkIndexedSize(ls labels.Labels) error {
	if n := indexedSize(ls); n > MaxIndexedSeriesBytes {
		return fmt.Errorf("%w: label set of %d bytes exceeds the index limit of %d bytes",
			ErrInvalidSeries, n, MaxIndexedSeriesBytes)
	}
	return nil
}

// SeriesPrefix is ls as text, cut to a short prefix for errors and logs.
func SeriesPrefix(ls labels.Labels) string {
	s := ls.String()
	if len(s) <= seriesPrefixLen {
		return s
	}
	return s[:seriesPrefixLen] + "...(truncated)"
}
