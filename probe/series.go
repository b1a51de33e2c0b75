package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"

	"github.com/aiserve/appliance/config"
)

// family is one metric family the probes write.
type family struct {
	name string
	help string
}

var (
	famSuccess      = family{"probe_success", "Whether the probe succeeded; on failure the reason label says why."}
	famDuration     = family{"probe_duration_seconds", "How long the probe took to complete, in seconds."}
	famStatus       = family{"probe_http_status_code", "Response HTTP status code."}
	famPhase        = family{"probe_http_duration_seconds", "Duration of the HTTP request by phase, in seconds."}
	famCertExpiry   = family{"probe_ssl_earliest_cert_expiry", "Earliest expiry of the server's TLS certificates, in Unix seconds."}
	famTTFT         = family{"probe_ttft_seconds", "Time from the request to the first generated token, in seconds."}
	famTPOT         = family{"probe_tpot_seconds", "Mean time between output tokens after the first, in seconds."}
	famTokens       = family{"probe_output_tokens", "Output tokens of the probe's answer."}
	famTokensPerSec = family{"probe_tokens_per_second", "Output tokens over the whole request time."}
	famTTFTThresh   = family{"probe_ttft_threshold_seconds", "The probe's ttft_threshold: P95 TTFT above it alerts (P1)."}
	famDurThresh    = family{"probe_duration_threshold_seconds", "The probe's duration_threshold: P95 duration above it alerts (P1)."}
)

// sample is one series of a run.
type sample struct {
	fam family
	ls  labels.Labels
	v   float64
}

// samples turns a result into the series of one run.
func samples(cfg *config.ProbeConfig, r *Result) []sample {
	var out []sample
	add := func(f family, v float64, extra ...string) {
		kv := append([]string{model.MetricNameLabel, f.name, "probe", cfg.Name}, extra...)
		out = append(out, sample{fam: f, ls: labels.FromStrings(kv...), v: v})
	}
	if r.Success {
		add(famSuccess, 1)
	} else {
		add(famSuccess, 0, "reason", r.Reason)
	}
	add(famDuration, r.Duration.Seconds())
	if r.StatusCode != 0 {
		add(famStatus, float64(r.StatusCode))
	}
	if cfg.Kind == config.ProbeKindHTTP {
		for _, ph := range Phases {
			add(famPhase, r.Phases[ph].Seconds(), "phase", ph)
		}
	}
	if !r.CertExpiry.IsZero() {
		add(famCertExpiry, float64(r.CertExpiry.Unix()))
	}
	if r.HasTTFT {
		add(famTTFT, r.TTFT.Seconds())
	}
	if r.OutputTokens > 1 {
		add(famTPOT, r.TPOT.Seconds())
	}
	if cfg.Kind == config.ProbeKindLLM {
		add(famTokens, float64(r.OutputTokens))
		if r.Success {
			add(famTokensPerSec, r.TokensPerSecond())
		}
		add(famTTFTThresh, time.Duration(cfg.TTFTThreshold).Seconds())
	}
	add(famDurThresh, time.Duration(cfg.DurationThreshold).Seconds())
	return out
}

// seriesWriter writes the runs of one probe and marks stale the series a
// run no longer writes (probe_success{reason="timeout"} once the probe
// succeeds again) and, on Close, every series of the probe, so that a
// removed probe disappears from queries at once, as a removed scrape target
// does.
//
// Timestamps strictly increase: a write at or before the previous one's
// millisecond (a clock that stood still, a reload right after a run) moves
// to the next millisecond, because the storage merges two samples of one
// series at one timestamp, the larger value winning and a staleness marker
// only over another marker, so the marker would be lost.
type seriesWriter struct {
	app   storage.AppendableV2
	prev  map[uint64]labels.Labels
	lastT int64 // ms of the last write; 0 before the first
}

func newSeriesWriter(app storage.AppendableV2) *seriesWriter {
	return &seriesWriter{app: app, prev: map[uint64]labels.Labels{}}
}

// write appends the samples of one run at ts and commits them.
func (w *seriesWriter) write(ss []sample, ts time.Time) error {
	a := w.app.AppenderV2(context.Background())
	t := ts.UnixMilli()
	if w.lastT != 0 && t <= w.lastT {
		t = w.lastT + 1
	}
	cur := make(map[uint64]labels.Labels, len(ss))
	var errs []error
	for _, s := range ss {
		cur[s.ls.Hash()] = s.ls
		v := s.v
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		_, err := a.Append(0, s.ls, 0, t, v, nil, nil, storage.AOptions{
			MetricFamilyName: s.fam.name,
			Metadata:         metadata.Metadata{Type: model.MetricTypeGauge, Help: s.fam.help},
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("append %s: %w", s.ls, err))
		}
	}
	for h, ls := range w.prev {
		if _, ok := cur[h]; !ok {
			if _, err := a.Append(0, ls, 0, t, math.Float64frombits(value.StaleNaN), nil, nil, storage.AOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("append staleness marker %s: %w", ls, err))
			}
		}
	}
	if err := a.Commit(); err != nil {
		return fmt.Errorf("commit probe samples: %w", err)
	}
	w.prev, w.lastT = cur, t
	return errors.Join(errs...)
}

// close marks every series of the last run stale at ts.
func (w *seriesWriter) close(ts time.Time) error {
	if len(w.prev) == 0 {
		return nil
	}
	return w.write(nil, ts)
}
