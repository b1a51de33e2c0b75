package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// JobName is the job label of every local reading.
const JobName = "local"

// Options configure a Reader.
type Options struct {
	// Host, Thermal and GPU switch the readings.
	Host, Thermal, GPU bool
	// ProcPath, SysPath and RootFSPath are the host's /proc, /sys and /.
	ProcPath, SysPath, RootFSPath string
	// NvidiaSMI is the nvidia-smi command, looked up on PATH unless it
	// contains a slash.
	NvidiaSMI string
	// Vcgencmd is the Raspberry Pi's vcgencmd (read with the thermal
	// readings: its get_throttled flags), looked up on PATH unless it
	// contains a slash; "" reads none.
	Vcgencmd string
	// Interval between two rounds.
	Interval time.Duration
	// Instance is the instance label (default: the host name).
	Instance string

	Appendable storage.AppendableV2
	Logger     *slog.Logger
	// Now is the clock of sample timestamps.
	Now func() time.Time
}

// DefaultOptions reads everything from the real paths every 15 s.
func DefaultOptions() Options {
	return Options{
		Host: true, Thermal: true, GPU: true,
		ProcPath: "/proc", SysPath: "/sys", RootFSPath: "/",
		NvidiaSMI: "nvidia-smi",
		Vcgencmd:  "vcgencmd",
		Interval:  15 * time.Second,
		Logger:    slog.New(slog.DiscardHandler),
		Now:       time.Now,
	}
}

// Reader collects the local readings.
type Reader struct {
	opts Options
	base []string
	gpu  *gpuReader
}

// New checks opts. It reads nothing and starts nothing.
func New(opts Options) (*Reader, error) {
	if opts.Appendable == nil {
		return nil, errors.New("local readings: no appendable")
	}
	if opts.Interval <= 0 {
		return nil, fmt.Errorf("local readings: interval %s must be positive", opts.Interval)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Instance == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		opts.Instance = h
	}
	r := &Reader{opts: opts, base: []string{"instance", opts.Instance, "job", JobName}}
	if opts.GPU {
		r.gpu = newGPUReader(opts.NvidiaSMI, opts.Instance, opts.Logger)
	}
	return r, nil
}

// family is one metric family.
type family struct {
	name string
	typ  model.MetricType
	help string
}

func gauge(name, help string) family   { return family{name, model.MetricTypeGauge, help} }
func counter(name, help string) family { return family{name, model.MetricTypeCounter, help} }

type sample struct {
	fam family
	ls  labels.Labels
	v   float64
}

// batch collects the samples of one round.
type batch struct {
	base    []string
	samples []sample
	lb      []string
}

// add appends a sample; kv are label name/value pairs.
func (b *batch) add(f family, v float64, kv ...string) {
	b.lb = append(b.lb[:0], model.MetricNameLabel, f.name)
	b.lb = append(b.lb, b.base...)
	b.lb = append(b.lb, kv...)
	b.samples = append(b.samples, sample{fam: f, ls: labels.FromStrings(b.lb...), v: v})
}

// collect reads every enabled reading once. A reading that is not there
// adds nothing.
func (r *Reader) collect(ctx context.Context) []sample {
	b := &batch{base: r.base}
	if r.opts.Host {
		readCPU(b, r.opts.ProcPath)
		readMeminfo(b, r.opts.ProcPath)
		readLoad(b, r.opts.ProcPath)
		readDiskstats(b, r.opts.ProcPath)
		readFilesystems(b, r.opts.ProcPath, r.opts.RootFSPath)
		readNetDev(b, r.opts.ProcPath)
	}
	if r.opts.Thermal {
		readThermalZones(b, r.opts.SysPath)
		readHwmon(b, r.opts.SysPath)
		readThrottled(ctx, b, r.opts.Vcgencmd)
	}
	if r.gpu != nil {
		r.gpu.read(ctx, b)
	}
	return b.samples
}

// Run collects and writes a round at once and then every interval until
// ctx ends; then it marks every series stale, so the storage must still be
// open when Run returns.
func (r *Reader) Run(ctx context.Context) error {
	w := &writer{app: r.opts.Appendable}
	tick := time.NewTicker(r.opts.Interval)
	defer tick.Stop()
	defer func() {
		if err := w.write(nil, r.opts.Now()); err != nil {
			r.opts.Logger.Warn("cannot mark local readings stale", "err", err)
		}
	}()
	for {
		ss := r.collect(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := w.write(ss, r.opts.Now()); err != nil {
			r.opts.Logger.Warn("cannot store local readings", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// writer appends rounds and marks stale what a round no longer has.
//
// Timestamps strictly increase: a round at or before the previous one's
// millisecond (the last marks at shutdown right after a round, a clock that
// stood still) moves to the next millisecond, because the storage merges
// two samples of one series at one timestamp, the larger value winning and
// a staleness marker only over another marker.
type writer struct {
	app   storage.AppendableV2
	prev  map[uint64]labels.Labels
	lastT int64 // ms of the last write; 0 before the first
}

func (w *writer) write(ss []sample, ts time.Time) error {
	if len(ss) == 0 && len(w.prev) == 0 {
		return nil
	}
	a := w.app.AppenderV2(context.Background())
	t := ts.UnixMilli()
	if w.lastT != 0 && t <= w.lastT {
		t = w.lastT + 1
	}
	cur := make(map[uint64]labels.Labels, len(ss))
	var errs []error
	for _, s := range ss {
		h := s.ls.Hash()
		if _, dup := cur[h]; dup || math.IsNaN(s.v) {
			continue
		}
		cur[h] = s.ls
		_, err := a.Append(0, s.ls, 0, t, s.v, nil, nil, storage.AOptions{
			MetricFamilyName: s.fam.name,
			Metadata:         metadata.Metadata{Type: s.fam.typ, Help: s.fam.help},
		})
		if err != nil && len(errs) < 10 {
			errs = append(errs, fmt.Errorf("append %s: %w", s.ls, err))
		}
	}
	for h, ls := range w.prev {
		if _, ok := cur[h]; !ok {
			if _, err := a.Append(0, ls, 0, t, math.Float64frombits(value.StaleNaN), nil, nil, storage.AOptions{}); err != nil && len(errs) < 10 {
				errs = append(errs, fmt.Errorf("append staleness marker %s: %w", ls, err))
			}
		}
	}
	if err := a.Commit(); err != nil {
		return fmt.Errorf("commit local readings: %w", err)
	}
	w.prev, w.lastT = cur, t
	return errors.Join(errs...)
}
