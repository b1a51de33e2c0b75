package remotewrite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"github.com/prometheus/prometheus/storage/remote"
	yaml2 "go.yaml.in/yaml/v2"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/storage"
)

// Options configure a Manager.
type Options struct {
	// Dir holds a directory per remote: <data dir>/remote_write.
	Dir        string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Manager runs the remote_write section: a queue and a sender per remote.
// It is the storage's CommitSink. Prepare and Apply change the remotes (a
// reload); Run sends until its context ends; Close closes the queues.
type Manager struct {
	opts    Options
	metrics *metrics

	// remotes is read by Committed on every commit; mu serialises the
	// changes (Apply, Run, Close).
	remotes atomic.Pointer[[]*remoteQueue]
	mu      sync.Mutex
	// swap is held for reading by Committed and for writing while Apply
	// replaces a queue, so that no commit falls between two queues.
	swap   sync.RWMutex
	runCtx context.Context // nil while not running
	wg     sync.WaitGroup
}

// remoteQueue is one remote: its queue and, while running, its sender.
type remoteQueue struct {
	name, url   string
	fingerprint string
	q           *queue
	client      remote.WriteClient
	set         sendSettings
	cancel      context.CancelFunc // stops the sender
	done        chan struct{}      // closed when the sender returned
}

// New returns a Manager with no remotes. It starts nothing.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: opts, metrics: newMetrics()}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(m.metrics)
	}
	m.remotes.Store(&[]*remoteQueue{})
	return m
}

// Next is a prepared remote_write section, for Apply.
type Next struct {
	remotes []*remoteQueue
	ext     labels.Labels
	cfgs    []*config.RemoteWriteConfig
}

// Prepare checks the section and builds its clients; it changes nothing.
func (m *Manager) Prepare(cfgs config.RemoteWriteConfigs, external labels.Labels) (*Next, error) {
	n := &Next{ext: external}
	var errs []error
	for _, c := range cfgs {
		rq, err := prepareRemote(c, external)
		if err != nil {
			errs = append(errs, fmt.Errorf("remote_write %s: %w", c.URL.Redacted(), err))
			continue
		}
		n.remotes = append(n.remotes, rq)
		n.cfgs = append(n.cfgs, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return n, nil
}

func prepareRemote(c *config.RemoteWriteConfig, external labels.Labels) (*remoteQueue, error) {
	name := c.QueueName()
	client, err := remote.NewWriteClient(name, &remote.ClientConfig{
		URL:              c.URL,
		Timeout:          c.RemoteTimeout,
		HTTPClientConfig: c.HTTPClientConfig,
		SigV4Config:      c.SigV4Config,
		AzureADConfig:    c.AzureADConfig,
		GoogleIAMConfig:  c.GoogleIAMConfig,
		Headers:          c.Headers,
		RetryOnRateLimit: c.QueueConfig.RetryOnRateLimit,
		WriteProtoMsg:    c.ProtobufMessage,
		RoundRobinDNS:    c.RoundRobinDNS,
	})
	if err != nil {
		return nil, err
	}
	b, err := yaml2.Marshal(c)
	if err != nil {
		return nil, err
	}
	qc := c.QueueConfig
	return &remoteQueue{
		name: name, url: c.URL.Redacted(), // the url label, as Prometheus' (no password)
		fingerprint: string(b) + "\x00" + external.String(),
		client:      client,
		set: sendSettings{
			maxSamples:    qc.MaxSamplesPerSend,
			deadline:      time.Duration(qc.BatchSendDeadline),
			minBackoff:    max(time.Duration(qc.MinBackoff), time.Millisecond),
			maxBackoff:    max(time.Duration(qc.MaxBackoff), time.Duration(qc.MinBackoff), time.Millisecond),
			proto:         c.ProtobufMessage,
			idleRetryWait: time.Second,
		},
	}, nil
}

// processor returns what the queue applies to a series before it is
// queued: external labels (where the series has not the label), then
// write_relabel_configs, as Prometheus' remote write does.
func processor(ext labels.Labels, rcs []*relabel.Config) func(labels.Labels) (labels.Labels, bool) {
	lb := labels.NewBuilder(labels.EmptyLabels())
	return func(ls labels.Labels) (labels.Labels, bool) {
		lb.Reset(ls)
		ext.Range(func(l labels.Label) {
			if ls.Get(l.Name) == "" {
				lb.Set(l.Name, l.Value)
			}
		})
		if len(rcs) > 0 && !relabel.ProcessBuilder(lb, rcs...) {
			return labels.EmptyLabels(), false
		}
		out := lb.Labels()
		return out, !out.IsEmpty()
	}
}

// Apply makes n the remotes: a remote whose entry (or the external
// labels) did not change keeps running; a new or changed one opens its
// queue (a changed one reopens it, keeping what it holds); a removed one
// stops its sender and closes its queue, leaving its files on disk.
func (m *Manager) Apply(n *Next) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.swap.Lock()
	defer m.swap.Unlock()
	old := map[string]*remoteQueue{}
	for _, rq := range *m.remotes.Load() {
		old[rq.name] = rq
	}
	var (
		next    []*remoteQueue
		opened  []*remoteQueue
		retired []*remoteQueue
	)
	keep := map[string]bool{}
	for i, rq := range n.remotes {
		if o := old[rq.name]; o != nil && o.fingerprint == rq.fingerprint {
			next = append(next, o)
			keep[o.name] = true
			continue
		}
		if o := old[rq.name]; o != nil {
			// Changed: the old queue closes first, its directory reopens.
			m.stopSender(o)
			if err := o.q.close(); err != nil {
				m.opts.Logger.Warn("remote write: close queue", "remote", o.name, "err", err)
			}
			m.metrics.forget(o.name, o.url)
			keep[o.name] = true
		}
		c := n.cfgs[i]
		qm := m.metrics.forRemote(rq.name, rq.url)
		q, err := openQueue(filepath.Join(m.opts.Dir, rq.name), int64(c.MaxDiskBytes), m.opts.Logger.With("remote", rq.name), qm, processor(n.ext, c.WriteRelabelConfigs))
		if err != nil {
			for _, x := range opened {
				_ = x.q.close()
			}
			return err
		}
		rq.q = q
		next = append(next, rq)
		opened = append(opened, rq)
	}
	for name, o := range old {
		if !keep[name] {
			retired = append(retired, o)
		}
	}
	m.remotes.Store(&next)
	for _, o := range retired {
		m.stopSender(o)
		if err := o.q.close(); err != nil {
			m.opts.Logger.Warn("remote write: close queue", "remote", o.name, "err", err)
		}
		m.metrics.forget(o.name, o.url)
		m.opts.Logger.Info("remote write: remote removed; its queue stopped", "remote", o.name, "url", o.url)
	}
	if m.runCtx != nil {
		for _, rq := range opened {
			m.startSender(rq)
		}
	}
	return nil
}

// Committed implements storage.CommitSink: the batch goes to every
// remote's queue. It waits on no remote.
func (m *Manager) Committed(b *storage.CommitBatch) {
	m.swap.RLock()
	defer m.swap.RUnlock()
	for _, rq := range *m.remotes.Load() {
		rq.q.write(b)
	}
}

var _ storage.CommitSink = (*Manager)(nil)

// Run sends every remote's queue until ctx ends, then stops the senders;
// what they had not sent stays in the queues for the next start.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.runCtx = ctx
	for _, rq := range *m.remotes.Load() {
		m.startSender(rq)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.runCtx = nil
	for _, rq := range *m.remotes.Load() {
		m.stopSender(rq)
	}
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// startSender starts rq's sender; m.mu is held.
func (m *Manager) startSender(rq *remoteQueue) {
	ctx, cancel := context.WithCancel(m.runCtx)
	rq.cancel, rq.done = cancel, make(chan struct{})
	s := newSender(rq.q, rq.client, rq.set, m.opts.Logger.With("remote", rq.name, "url", rq.url))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(rq.done)
		s.run(ctx)
	}()
}

// stopSender stops rq's sender, if it runs, and waits for it; m.mu is held.
func (m *Manager) stopSender(rq *remoteQueue) {
	if rq.cancel == nil {
		return
	}
	rq.cancel()
	<-rq.done
	rq.cancel, rq.done = nil, nil
}

// Close closes every queue; call it after Run returned and after the
// last Commit.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, rq := range *m.remotes.Load() {
		m.stopSender(rq)
		errs = append(errs, rq.q.close())
	}
	m.remotes.Store(&[]*remoteQueue{})
	return errors.Join(errs...)
}
