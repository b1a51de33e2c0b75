package main

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/oklog/run"
	"github.com/stretchr/testify/require"
)

// TestAddPartStopsInOrder: the parts stop in the order they were added,
// each only after the one before has returned, even when a part added
// later would return at once.
func TestAddPartStopsInOrder(t *testing.T) {
	a := &appliance{logger: slog.New(slog.DiscardHandler)}
	var (
		g     run.Group
		mu    sync.Mutex
		order []string
	)
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	stop := make(chan struct{})
	g.Add(func() error { <-stop; return nil }, func(error) {})
	for _, name := range []string{"input", "rules", "notify", "storage"} {
		a.addPart(&g, name, func(ctx context.Context) error {
			<-ctx.Done()
			note(name)
			return nil
		})
	}
	close(stop)
	require.NoError(t, g.Run())
	require.Equal(t, []string{"input", "rules", "notify", "storage"}, order)
}
