package config

import (
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	yaml3 "go.yaml.in/yaml/v3"
)

// PipelineConfig is one entry of the pipelines section: a chain of
// segments, each measured on its own device (camera → edge upload, edge
// inference, edge → cloud sync, cloud analysis), whose times add up to
// the chain's. Devices behind NAT push their series through
// /api/v1/write or /api/v1/import/prometheus.
type PipelineConfig struct {
	// Name is the pipeline's, in /pipeline/<name>: letters, digits, '-',
	// '_' and '.'.
	Name     string           `yaml:"name"`
	Segments []*SegmentConfig `yaml:"segments"`
}

// SegmentConfig is one segment of a pipeline: its time per item, from a
// histogram or from a gauge holding a duration in seconds, over the
// series a selector picks.
type SegmentConfig struct {
	Name string `yaml:"name"`
	// Histogram is a histogram's base name (its _bucket, _sum and _count
	// series): the mean is rate(_sum) / rate(_count), the P95 is
	// histogram_quantile's.
	Histogram string `yaml:"histogram,omitempty"`
	// Duration is a gauge of seconds (the last item's time, as a device
	// reports it): the mean is its average over time, the P95 its 95th
	// percentile over time. Give histogram or duration, not both.
	Duration string `yaml:"duration,omitempty"`
	// Selector narrows the series: label matchers in braces,
	// {device=~"cam.*"}; "" for all of them.
	Selector string `yaml:"selector,omitempty"`
	// Transfer names the segment's transfer counters, each optional.
	Transfer *TransferConfig `yaml:"transfer,omitempty"`
}

// TransferConfig names the counters of what a segment moves: bytes sent,
// retries and failures (the selector applies to them too).
type TransferConfig struct {
	Bytes    string `yaml:"bytes,omitempty"`
	Retries  string `yaml:"retries,omitempty"`
	Failures string `yaml:"failures,omitempty"`
}

// Metric is the segment's metric: the histogram's base name or the gauge.
func (s *SegmentConfig) Metric() string {
	if s.Histogram != "" {
		return s.Histogram
	}
	return s.Duration
}

// Matchers is the selector without its braces ("" for none).
func (s *SegmentConfig) Matchers() string {
	sel := strings.TrimSpace(s.Selector)
	sel = strings.TrimSuffix(strings.TrimPrefix(sel, "{"), "}")
	return strings.TrimSpace(sel)
}

// validPipelineName: what a path element of /pipeline/<name> may hold.
func validPipelineName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// decodePipelines decodes the pipelines section one pipeline at a time,
// so that each broken one is reported at its line, and checks them.
func (l *loader) decodePipelines(n *yaml3.Node) []*PipelineConfig {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml3.SequenceNode {
		l.errorf(n.Line, "pipelines must be a list of pipelines, each with a name and segments")
		return nil
	}
	var out []*PipelineConfig
	first := map[string]int{}
	for _, item := range n.Content {
		item = deref(item)
		pc := &PipelineConfig{}
		if !l.decode(item, pc) {
			continue
		}
		if !l.checkPipeline(item, pc) {
			continue
		}
		line := keyLine(item, "name")
		if at, dup := first[pc.Name]; dup {
			l.errorf(line, "pipeline name %q is used twice (first at line %d)", pc.Name, at)
			continue
		}
		first[pc.Name] = line
		out = append(out, pc)
	}
	return out
}

// checkPipeline reports what is wrong with one pipeline, at the line of
// the key at fault; false when anything is.
func (l *loader) checkPipeline(n *yaml3.Node, pc *PipelineConfig) bool {
	ok := true
	bad := func(line int, format string, args ...any) {
		l.errorf(line, format, args...)
		ok = false
	}
	if !validPipelineName(pc.Name) {
		bad(keyLine(n, "name"), "pipeline name %q: want letters, digits, '-', '_' or '.' (it is the page /pipeline/<name>)", pc.Name)
		return false
	}
	_, segs := mappingKey(n, "segments")
	if len(pc.Segments) == 0 || segs == nil {
		bad(keyLine(n, "name"), "pipeline %s: segments is empty; list the segments in order, each with a histogram or a duration", pc.Name)
		return false
	}
	seen := map[string]bool{}
	p := parser.NewParser(parser.Options{})
	for i, s := range pc.Segments {
		sn := n
		if i < len(segs.Content) {
			sn = deref(segs.Content[i])
		}
		if s == nil {
			bad(sn.Line, "pipeline %s: segment %d is empty", pc.Name, i+1)
			continue
		}
		if s.Name == "" {
			bad(sn.Line, "pipeline %s: segment %d needs a name", pc.Name, i+1)
			continue
		}
		if seen[s.Name] {
			bad(keyLine(sn, "name"), "pipeline %s: segment %q is listed twice", pc.Name, s.Name)
			continue
		}
		seen[s.Name] = true
		switch {
		case s.Histogram == "" && s.Duration == "":
			bad(keyLine(sn, "name"), "pipeline %s segment %s: give histogram (a histogram's base name) or duration (a gauge of seconds)", pc.Name, s.Name)
			continue
		case s.Histogram != "" && s.Duration != "":
			bad(keyLine(sn, "duration"), "pipeline %s segment %s: give histogram or duration, not both", pc.Name, s.Name)
			continue
		case s.Histogram != "" && (strings.HasSuffix(s.Histogram, "_bucket") || strings.HasSuffix(s.Histogram, "_count") || strings.HasSuffix(s.Histogram, "_sum")):
			bad(keyLine(sn, "histogram"), "pipeline %s segment %s: histogram %q: give the base name without _bucket, _sum or _count", pc.Name, s.Name, s.Histogram)
			continue
		}
		key := "histogram"
		if s.Duration != "" {
			key = "duration"
		}
		if !model.LegacyValidation.IsValidMetricName(s.Metric()) {
			bad(keyLine(sn, key), "pipeline %s segment %s: %s %q is not a metric name", pc.Name, s.Name, key, s.Metric())
			continue
		}
		if sel := strings.TrimSpace(s.Selector); sel != "" {
			if !strings.HasPrefix(sel, "{") || !strings.HasSuffix(sel, "}") {
				bad(keyLine(sn, "selector"), "pipeline %s segment %s: selector %q must be label matchers in braces, e.g. {device=~\"cam.*\"}", pc.Name, s.Name, s.Selector)
				continue
			}
			if _, err := p.ParseMetricSelector(s.Metric() + sel); err != nil {
				bad(keyLine(sn, "selector"), "pipeline %s segment %s: selector %q: %v", pc.Name, s.Name, s.Selector, err)
				continue
			}
		}
		if t := s.Transfer; t != nil {
			for _, c := range []struct{ key, name string }{{"bytes", t.Bytes}, {"retries", t.Retries}, {"failures", t.Failures}} {
				if c.name != "" && !model.LegacyValidation.IsValidMetricName(c.name) {
					bad(keyLine(sn, "transfer", c.key), "pipeline %s segment %s: transfer %s %q is not a metric name (a counter, e.g. edge_upload_bytes_total)", pc.Name, s.Name, c.key, c.name)
				}
			}
		}
	}
	return ok
}
