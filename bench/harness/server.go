package harness

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"
)

const (
	// readyTimeout bounds the wait for a system on an empty data dir to
	// answer on its ready path: one that takes longer is reported as
	// failed, not waited for.
	readyTimeout = 2 * time.Minute
	// StopGrace is how long a system gets to flush and exit after SIGTERM
	// before [Process.Stop] kills it.
	StopGrace = 2 * time.Minute
)

// Server is a system under test running as a child process and serving
// HTTP on a loopback address.
type Server struct {
	*Process
	Addr  string    // host:port it listens on
	URL   string    // "http://" + Addr, the base of its API
	Ready time.Time // when it first answered on its ready path
}

// Launch starts sys's binary bin on a free loopback address with config
// and dataDir, its stdout and stderr going to logPath, waits until it
// answers on its ready path, then lets it run for warmup (series creation,
// first WAL segments, caches) before returning.
//
// The caller must Stop or Kill the returned server's process. On error the
// process, if it started, has been killed; an error while waiting for it
// to become ready names its log.
func Launch(ctx context.Context, client *http.Client, sys System, bin, config, dataDir, logPath string, warmup time.Duration) (*Server, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	proc, err := Start(sys.Name, bin, sys.Args(config, dataDir, addr), logPath)
	if err != nil {
		return nil, err
	}
	s := &Server{Process: proc, Addr: addr, URL: "http://" + addr}
	readyCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	err = WaitHTTP(readyCtx, client, s.URL+sys.ReadyPath, proc.Exited())
	cancel()
	if err != nil {
		proc.Kill()
		return nil, fmt.Errorf("%s did not become ready (log: %s): %w", sys.Name, logPath, err)
	}
	s.Ready = time.Now()
	log.Printf("%s: ready on %s (pid %d); warming up for %s", sys.Name, addr, proc.Pid(), warmup)
	if err := proc.Sleep(ctx, warmup); err != nil {
		proc.Kill()
		return nil, err
	}
	return s, nil
}
