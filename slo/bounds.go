package slo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aiserve/appliance/config"
)

// boundTolerance is how close, relative to the threshold, a bucket bound
// must be to count as equal to it. TGI's bounds are products of floats
// (0.0001 × 1.5 = 0.00015000000000000001), one unit in the last place
// away from the number an operator writes (150us); 1e-9 accepts that and
// nothing a person would call a different number.
const boundTolerance = 1e-9

// BoundSource lists the `le` values of a histogram's buckets as the data
// spells them: the values of label le on series <histogram>_bucket
// matching selector (which may be "").
type BoundSource interface {
	BucketBounds(ctx context.Context, histogram, selector string) ([]string, error)
}

// ErrNoBound is returned (wrapped) by MatchBound for a threshold that is
// no bucket bound of the histogram.
var ErrNoBound = errors.New("threshold is not a bucket bound of the histogram")

// MatchBound returns the spelling among les of the bound equal to
// threshold by number. When none is, the error names the nearest bound
// below and above.
func MatchBound(threshold float64, les []string) (string, error) {
	type bound struct {
		text string
		v    float64
	}
	var bs []bound
	for _, le := range les {
		v, err := strconv.ParseFloat(le, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			continue
		}
		if sameNumber(v, threshold) {
			return le, nil
		}
		bs = append(bs, bound{le, v})
	}
	slices.SortFunc(bs, func(a, b bound) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return strings.Compare(a.text, b.text)
	})
	var below, above string
	for _, b := range bs {
		if b.v < threshold {
			below = b.text
		} else if above == "" {
			above = b.text
		}
	}
	switch {
	case len(bs) == 0:
		return "", fmt.Errorf("%w: the histogram has no finite bucket bounds", ErrNoBound)
	case below == "":
		return "", fmt.Errorf("%w; the lowest bound is %s", ErrNoBound, above)
	case above == "":
		return "", fmt.Errorf("%w; the highest finite bound is %s", ErrNoBound, below)
	}
	return "", fmt.Errorf("%w; the nearest bounds are %s and %s", ErrNoBound, below, above)
}

func sameNumber(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return a == b || math.Abs(a-b) <= boundTolerance*math.Max(math.Abs(a), math.Abs(b))
}

// ResolveBounds returns, per latency SLO, the le text of its threshold in
// the data; SLOs whose histogram has no data yet are left out (their rules
// match the usual spellings). A threshold that is no bound is an error.
func ResolveBounds(ctx context.Context, slos []*config.SLOConfig, src BoundSource) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for _, s := range slos {
		if s.Kind != config.SLOKindLatency {
			continue
		}
		les, err := src.BucketBounds(ctx, s.Histogram, s.Selector)
		if err != nil {
			return nil, fmt.Errorf("slo %s: read the bucket bounds of %s: %w", s.Name, s.Histogram, err)
		}
		if len(les) == 0 {
			continue
		}
		le, err := MatchBound(float64(s.Threshold), les)
		if err != nil {
			errs = append(errs, fmt.Errorf("slo %s: threshold %s: %w of %s", s.Name, s.Threshold, err, s.Histogram))
			continue
		}
		out[s.Name] = le
	}
	return out, errors.Join(errs...)
}

// CheckBounds reports, for appliance check, every latency SLO whose
// threshold is no bucket bound of its histogram, as far as src knows the
// histogram; a histogram src has never seen is not an error (the model
// server may not run yet).
func CheckBounds(ctx context.Context, slos []*config.SLOConfig, src BoundSource) error {
	_, err := ResolveBounds(ctx, slos, src)
	return err
}

// leAlternatives is a regular expression matching the usual spellings of
// v as an le value: Go's and Python's shortest form, with and without a
// trailing ".0" for whole numbers, and the exponent forms.
func leAlternatives(v float64) string {
	forms := []string{
		strconv.FormatFloat(v, 'f', -1, 64),
		strconv.FormatFloat(v, 'g', -1, 64),
		strconv.FormatFloat(v, 'e', -1, 64),
	}
	if v == math.Trunc(v) {
		forms = append(forms, strconv.FormatFloat(v, 'f', 1, 64))
	}
	slices.Sort(forms)
	forms = slices.Compact(forms)
	for i, f := range forms {
		forms[i] = regexp.QuoteMeta(f)
	}
	return strings.Join(forms, "|")
}

// KnownBounds are the bucket bounds of the histograms of the model servers
// the appliance recognises, as their /metrics print them (from
// ../shared/fixtures), so that appliance check can refuse a threshold
// before any data arrives.
type KnownBounds map[string][]string

var vllmLatencyBounds = []string{"0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0", "50.0", "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0", "7680.0"}

// DefaultKnownBounds returns the bounds of vLLM's, SGLang's and TGI's
// request latency histograms.
func DefaultKnownBounds() KnownBounds {
	tgi := make([]string, 0, 35)
	for i, v := 0, 0.0001; i < 35; i++ {
		v *= 1.5
		tgi = append(tgi, strconv.FormatFloat(v, 'g', -1, 64))
	}
	return KnownBounds{
		"vllm:e2e_request_latency_seconds": vllmLatencyBounds,
		"sglang:e2e_request_latency_seconds": {"0.1", "0.2", "0.4", "0.6", "0.8", "1.0", "2.0", "4.0", "6.0", "8.0", "10.0", "20.0", "40.0",
			"60.0", "80.0", "100.0", "200.0", "400.0", "600.0", "1200.0", "1800.0", "2400.0"},
		"tgi_request_duration": tgi,
	}
}

// BucketBounds implements BoundSource.
func (k KnownBounds) BucketBounds(_ context.Context, histogram, _ string) ([]string, error) {
	return k[histogram], nil
}
