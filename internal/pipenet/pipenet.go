package pipenet

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
)

// Listener is a net.Listener whose connections are the server ends of
// net.Pipe pairs made by Dial.
type Listener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// Listen returns a Listener; it starts nothing.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for a Dial or for Close.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close makes Accept and Dial fail; it is safe to call twice.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is a placeholder TCP address.
func (l *Listener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

// Dial has the shape of http.Transport.DialContext: whatever the address,
// it connects to the Listener.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Server is h served on a Listener.
type Server struct {
	*Listener
}

// Serve serves h until the test ends; then it closes the server and its
// connections and waits for every handler to return (http.Server.Close
// does not), so that nothing the test started outlives it.
func Serve(t testing.TB, h http.Handler) *Server {
	t.Helper()
	ln := Listen()
	var handlers sync.WaitGroup
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		h.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
		handlers.Wait()
	})
	return &Server{Listener: ln}
}

// Client returns a client whose every connection goes to s.
func (s *Server) Client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: s.Dial, DisableKeepAlives: true}}
}
