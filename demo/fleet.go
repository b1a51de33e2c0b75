package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// FleetOptions configure a fleet. Zero fields take the defaults of
// DefaultFleetOptions.
type FleetOptions struct {
	Host string // default "127.0.0.1"
	// BasePort: instance i listens on BasePort+i; 0 picks random free ports.
	BasePort  int
	Instances int // default 3
	// Models each instance serves (label model_name). Default:
	// "llama-3.1-8b-instruct" and "qwen2.5-7b-instruct".
	Models []string
	Seed   int64
	// RequestRate is the mean requests per second per model per instance
	// (default 2). For a fleet with almost no background traffic use a tiny
	// positive value such as 1e-9.
	RequestRate float64
	// Now is the clock of the simulation (default time.Now). The streaming
	// endpoints pace tokens on the wall clock whatever Now is.
	Now func() time.Time
}

// DefaultModels are the models an instance serves unless told otherwise.
var DefaultModels = []string{"llama-3.1-8b-instruct", "qwen2.5-7b-instruct"}

// DefaultFleetOptions returns three instances on 127.0.0.1:8000-8002 (vLLM's
// default port, so auto-detection finds them) serving the default models at
// 2 requests per second per model.
func DefaultFleetOptions() FleetOptions {
	return FleetOptions{
		Host:        "127.0.0.1",
		BasePort:    8000,
		Instances:   3,
		Models:      append([]string(nil), DefaultModels...),
		Seed:        1,
		RequestRate: 2,
		Now:         time.Now,
	}
}

// ErrPortInUse is wrapped by NewFleet's error when a port is taken.
var ErrPortInUse = errors.New("port in use")

// Fleet is a set of simulated vLLM servers, one listener each.
type Fleet struct {
	opts      FleetOptions
	instances []*Instance
	started   atomic.Bool // set by Run or Close
}

// NewFleet checks opts and binds every listener, so the ports are known
// and a taken port fails here, naming the port. It starts no goroutines;
// call Run to serve, or Close to release the ports without serving.
func NewFleet(opts FleetOptions) (*Fleet, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Instances == 0 {
		opts.Instances = 3
	}
	if len(opts.Models) == 0 {
		opts.Models = append([]string(nil), DefaultModels...)
	} else {
		opts.Models = append([]string(nil), opts.Models...)
	}
	if opts.RequestRate == 0 {
		opts.RequestRate = 2
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch {
	case opts.Instances < 0:
		return nil, fmt.Errorf("demo fleet: instances must be positive, got %d", opts.Instances)
	case opts.RequestRate < 0:
		return nil, fmt.Errorf("demo fleet: request rate must be positive, got %g", opts.RequestRate)
	case opts.BasePort < 0 || opts.BasePort+opts.Instances-1 > 65535 && opts.BasePort != 0:
		return nil, fmt.Errorf("demo fleet: ports %d-%d are out of range; choose a base port below %d",
			opts.BasePort, opts.BasePort+opts.Instances-1, 65536-opts.Instances)
	}
	seen := map[string]bool{}
	for _, m := range opts.Models {
		if m == "" || seen[m] {
			return nil, fmt.Errorf("demo fleet: model names must be unique and non-empty, got %q", opts.Models)
		}
		seen[m] = true
	}

	f := &Fleet{opts: opts}
	for i := 0; i < opts.Instances; i++ {
		port := 0
		if opts.BasePort != 0 {
			port = opts.BasePort + i
		}
		addr := net.JoinHostPort(opts.Host, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			f.Close()
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("demo instance %d: %w: %s is taken; stop what listens there or choose another base port (0 picks free ports): %w",
					i, ErrPortInUse, addr, err)
			}
			return nil, fmt.Errorf("demo instance %d: listen on %s: %w", i, addr, err)
		}
		in := newInstance(i, &f.opts)
		in.ln, in.addr = ln, ln.Addr().String()
		f.instances = append(f.instances, in)
	}
	return f, nil
}

// Targets returns the instances' host:port in instance order.
func (f *Fleet) Targets() []string {
	out := make([]string, len(f.instances))
	for i, in := range f.instances {
		out[i] = in.addr
	}
	return out
}

// Len is the number of instances.
func (f *Fleet) Len() int { return len(f.instances) }

// Instance returns instance i, or nil when i is out of range.
func (f *Fleet) Instance(i int) *Instance {
	if i < 0 || i >= len(f.instances) {
		return nil
	}
	return f.instances[i]
}

// SetAllSlow sets the slow factor of every instance.
func (f *Fleet) SetAllSlow(factor float64) {
	for _, in := range f.instances {
		in.SetSlow(factor)
	}
}

// shutdownTimeout bounds how long Run waits for open connections after its
// context is done. Streams end at once (their contexts are cancelled), so
// this is only reached by a client that stopped reading.
const shutdownTimeout = 3 * time.Second

// Run serves every instance until ctx is done, then shuts the servers
// down, ending streams in flight, and returns nil. It returns an error if a
// server fails or if the fleet already ran or was closed. Run may be called
// once.
func (f *Fleet) Run(ctx context.Context) error {
	if !f.started.CompareAndSwap(false, true) {
		return errors.New("demo fleet: Run called twice or after Close")
	}
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	servers := make([]*http.Server, len(f.instances))
	errc := make(chan error, len(f.instances))
	for i, in := range f.instances {
		srv := &http.Server{
			Handler:           in,
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return base },
		}
		servers[i] = srv
		go func() {
			err := srv.Serve(in.ln)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			} else if err != nil {
				err = fmt.Errorf("demo instance %d on %s: %w", in.index, in.addr, err)
			}
			errc <- err
		}()
	}
	var err error
	pending := len(servers)
	select {
	case <-ctx.Done():
	case err = <-errc:
		pending--
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer scancel()
	for _, srv := range servers {
		if serr := srv.Shutdown(sctx); serr != nil {
			srv.Close()
		}
	}
	for ; pending > 0; pending-- {
		if e := <-errc; err == nil {
			err = e
		}
	}
	return err
}

// Close releases the listeners of a fleet that never ran. It is safe to
// call more than once, and a no-op once Run has started (Run closes them).
func (f *Fleet) Close() error {
	if !f.started.CompareAndSwap(false, true) {
		return nil
	}
	for _, in := range f.instances {
		in.ln.Close()
	}
	return nil
}
