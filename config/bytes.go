package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// Bytes is a size in bytes, written in the file as a number with an optional
// unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of
// 1024), e.g. "512MiB" or "1.5GB". It is printed back in the largest unit
// that represents it exactly.
type Bytes int64

var (
	bytesRE    = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)$`)
	bytesUnits = map[string]float64{
		"": 1, "B": 1,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	}
	// bytesPrintUnits are tried in order by String.
	bytesPrintUnits = []struct {
		name string
		size int64
	}{
		{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
	}
)

// ParseBytes parses a size such as "32MiB".
func ParseBytes(s string) (Bytes, error) {
	m := bytesRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional unit B, KB, MB, GB, TB, KiB, MiB, GiB or TiB, e.g. 512MiB", s)
	}
	unit, ok := bytesUnits[m[2]]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB", s, m[2])
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %w", s, err)
	}
	v := math.Round(n * unit)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return Bytes(v), nil
}

func (b Bytes) String() string {
	for _, u := range bytesPrintUnits {
		if b != 0 && int64(b)%u.size == 0 {
			return strconv.FormatInt(int64(b)/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *Bytes) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (b Bytes) MarshalYAML() (any, error) {
	return b.String(), nil
}
