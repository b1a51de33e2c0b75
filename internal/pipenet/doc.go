// Package pipenet serves HTTP over in-memory connections (net.Pipe), for
// tests that run a server and its client inside a testing/synctest bubble.
//
// A goroutine blocked on a real socket is not durably blocked, so a
// bubble's clock would not move while a client waits for a server that
// sleeps; blocked on a pipe, it is, and the bubble's fake time runs the
// server's sleeps, the client's timeouts and time.Now together: every
// duration either side measures is exact.
//
//	synctest.Test(t, func(t *testing.T) {
//		srv := pipenet.Serve(t, handler)
//		client := &http.Client{Transport: &http.Transport{DialContext: srv.Dial}}
//		...
//	})
//
// The server is closed when the test ends, after every handler returned.
package pipenet
