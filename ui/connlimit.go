package ui

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter caps the connections the server holds open: Accept waits
// for a free slot, so connections beyond the cap wait in the kernel's
// backlog and take no file descriptor of the process. When every slot is
// taken, the connection idle longest (accepted but sending nothing yet, or
// kept alive between requests) is closed to free one, so that idle
// connections, however many, cannot lock out a client with a request.
// Connections serving a request are never closed for another.
type connLimiter struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once

	mu sync.Mutex
	// idle holds the connections with no request in progress, by the
	// time they became idle; keys are what http.Server passes to
	// ConnState (the TLS connection over a limitedConn with HTTPS).
	idle map[net.Conn]time.Time

	onEvict func()
}

func newConnLimiter(l net.Listener, n int, onEvict func()) *connLimiter {
	return &connLimiter{
		Listener: l,
		sem:      make(chan struct{}, n),
		done:     make(chan struct{}),
		idle:     map[net.Conn]time.Time{},
		onEvict:  onEvict,
	}
}

// Accept waits for a free slot, closing the connection idle longest when
// there is none, then accepts.
func (l *connLimiter) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.evictIdle()
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close stops Accept, also one waiting for a slot.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// connState is the http.Server's ConnState hook.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle:
		l.idle[c] = time.Now()
	default:
		delete(l.idle, c)
	}
}

// evictIdle closes the connection idle longest, if any.
func (l *connLimiter) evictIdle() {
	l.mu.Lock()
	var (
		oldest net.Conn
		since  time.Time
	)
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest != nil {
		delete(l.idle, oldest)
	}
	l.mu.Unlock()
	if oldest != nil {
		_ = oldest.Close()
		if l.onEvict != nil {
			l.onEvict()
		}
	}
}

// limitedConn frees its slot once, when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
