package query

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// Options are the engine's limits. Zero values are replaced by defaults.
type Options struct {
	// Timeout bounds one query's evaluation (Prometheus: 2m).
	Timeout time.Duration
	// MaxSamples bounds the samples one query may load at once
	// (Prometheus: 50,000,000, about 800 MB at 16 bytes a sample).
	MaxSamples int
	// MaxConcurrent bounds the queries evaluated at once (Prometheus: 20);
	// others wait for a slot.
	MaxConcurrent int
	// LookbackDelta is how far back an instant selector looks for a sample
	// (Prometheus: 5m).
	LookbackDelta time.Duration
	// SplitParallelism is how many parts, each on its own core, a long
	// range query may be split into at step boundaries (default: one per
	// core, at most 4; 1 turns splitting off). Each part has the whole
	// MaxSamples; a split query takes one MaxConcurrent slot.
	SplitParallelism int
	// MaxQueryLength and MaxQueryDepth bound the query text (see
	// DefaultMaxQueryLength, DefaultMaxQueryDepth); past them a query is
	// refused before it is parsed.
	MaxQueryLength, MaxQueryDepth int
	// MaxSubquerySteps bounds the steps one subquery evaluates (see
	// DefaultMaxSubquerySteps).
	MaxSubquerySteps int
	// RemoteRead are the remote_read endpoints read besides each query's
	// Queryable (remoteread.go); nil reads none.
	RemoteRead *RemoteRead
	// NoPushdown turns the aggregation pushdown off (pushdown.go): every
	// range query is evaluated by Prometheus' engine step by step.
	NoPushdown bool
	// RemoteQuery is hub mode (remotequery.go): while it has a remote
	// API in force, every query is sent there instead; nil is local mode.
	RemoteQuery *RemoteQuery
}

// DefaultOptions returns Prometheus' defaults, and the appliance's bounds
// on query text (Prometheus has none).
func DefaultOptions() Options {
	return Options{
		Timeout:          2 * time.Minute,
		MaxSamples:       50_000_000,
		MaxConcurrent:    20,
		LookbackDelta:    5 * time.Minute,
		SplitParallelism: defaultSplitParallelism(),
		MaxQueryLength:   DefaultMaxQueryLength,
		MaxQueryDepth:    DefaultMaxQueryDepth,
		MaxSubquerySteps: DefaultMaxSubquerySteps,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Timeout <= 0 {
		o.Timeout = d.Timeout
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = d.MaxSamples
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = d.MaxConcurrent
	}
	if o.LookbackDelta <= 0 {
		o.LookbackDelta = d.LookbackDelta
	}
	if o.SplitParallelism <= 0 {
		o.SplitParallelism = defaultSplitParallelism()
	}
	if o.MaxQueryLength <= 0 {
		o.MaxQueryLength = DefaultMaxQueryLength
	}
	if o.MaxQueryDepth <= 0 {
		o.MaxQueryDepth = DefaultMaxQueryDepth
	}
	if o.MaxSubquerySteps <= 0 {
		o.MaxSubquerySteps = DefaultMaxSubquerySteps
	}
	return o
}

// Engine is Prometheus' PromQL engine with the appliance's limits. It
// implements promql.QueryEngine and is safe for concurrent use.
type Engine struct {
	*promql.Engine
	opts   Options
	parser parser.Parser
	// slots bounds the queries evaluated at once; parts is the engine
	// the parts of a split range query run on (the split query holds
	// one slot for all of them, so parts take none).
	slots *slots
	parts *promql.Engine
	// subqueryStepMs is the step of subqueries written without one.
	subqueryStepMs atomic.Int64
	// minSplitSteps is the fewest steps a part of a split range query
	// gets (minStepsPerPart; the compliance test lowers it so that
	// Prometheus' own test files run split).
	minSplitSteps int
	// minSplitRange is the shortest range a part gets (minRangePerPart;
	// 0 in tests that split short ranges).
	minSplitRange time.Duration
	// features are the language features the engine runs with.
	features features
	// pushed and fellBack count the range queries the pushdown evaluated
	// and those it handed back to the engine whole, visited the reads it
	// made through a SeriesVisitor (tests read them).
	pushed, fellBack, visited atomic.Int64
}

// features are the PromQL language features an engine enables. The
// appliance runs Prometheus' defaults (the zero value); the compliance
// test runs Prometheus' test files with the features they are written
// for (promqltest.NewTestEngine's).
type features struct {
	parser             parser.Options
	delayedNameRemoval bool
	startTimestamps    bool
}

// New returns an engine with opts (zero fields take defaults). reg may be nil.
func New(opts Options, logger *slog.Logger, reg prometheus.Registerer) *Engine {
	return newEngine(opts, logger, reg, features{})
}

func newEngine(opts Options, logger *slog.Logger, reg prometheus.Registerer, f features) *Engine {
	opts = opts.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := limitedParser{
		Parser:    parser.NewParser(f.parser),
		maxLength: opts.MaxQueryLength,
		maxDepth:  opts.MaxQueryDepth,
	}
	e := &Engine{opts: opts, parser: p, minSplitSteps: minStepsPerPart, minSplitRange: minRangePerPart, features: f}
	// Prometheus ties this to the global evaluation_interval (default 1m).
	e.subqueryStepMs.Store(time.Minute.Milliseconds())
	e.slots = newSlots(opts.MaxConcurrent)
	engineOpts := promql.EngineOpts{
		Logger:                   logger,
		Reg:                      reg,
		MaxSamples:               opts.MaxSamples,
		Timeout:                  opts.Timeout,
		ActiveQueryTracker:       e.slots,
		LookbackDelta:            opts.LookbackDelta,
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		EnablePerStepStats:       true,
		EnableDelayedNameRemoval: f.delayedNameRemoval,
		UseStartTimestamps:       f.startTimestamps,
		Parser:                   p,
		NoStepSubqueryIntervalFn: func(int64) int64 { return e.subqueryStepMs.Load() },
	}
	e.Engine = promql.NewEngine(engineOpts)
	engineOpts.Reg, engineOpts.ActiveQueryTracker = nil, nil
	e.parts = promql.NewEngine(engineOpts)
	return e
}

// Options returns the limits in force.
func (e *Engine) Options() Options { return e.opts }

// Parser returns the PromQL parser the engine uses.
func (e *Engine) Parser() parser.Parser { return e.parser }

// SetNoStepSubqueryInterval sets the default resolution of subqueries
// without a step (`x[1h:]`), which Prometheus ties to the global evaluation
// interval.
func (e *Engine) SetNoStepSubqueryInterval(d time.Duration) {
	if ms := d.Milliseconds(); ms > 0 {
		e.subqueryStepMs.Store(ms)
	}
}

// slots is an in-memory promql.QueryTracker that only bounds concurrency.
// Prometheus' own tracker also writes active queries to an mmapped file to
// log them after a crash; the appliance does not need that.
type slots struct {
	sem chan struct{}
}

func newSlots(n int) *slots { return &slots{sem: make(chan struct{}, n)} }

func (s *slots) GetMaxConcurrent() int { return cap(s.sem) }

func (s *slots) Insert(ctx context.Context, _ string) (int, error) {
	select {
	case s.sem <- struct{}{}:
		return 0, nil
	case <-ctx.Done():
		// Prometheus' API answers these 503 (timeout) and 499-like
		// "canceled", as Prometheus does for a full queue.
		return 0, slotErr(ctx.Err())
	}
}

func (s *slots) Delete(int) { <-s.sem }

func (s *slots) Close() error { return nil }

// slotErr is the error of a query that did not get a slot in time: the
// engine's timeout or cancellation, so that the API answers 503.
func slotErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return promql.ErrQueryTimeout("waiting for a free query slot (query.max_concurrency)")
	}
	return promql.ErrQueryCanceled("waiting for a free query slot")
}
