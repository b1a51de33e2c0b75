package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/demo"
)

// BenchmarkDiscoverFleet times what GET /api/v1/appliance/dashboards/overview
// does per request (Discover plus Resolve) over the ingest bench's fleet:
// 140 two-model demo instances, about 100,000 series.
//
//	go test ./ui/dashboard/ -run '^$' -bench DiscoverFleet -benchtime 20x
func BenchmarkDiscoverFleet(b *testing.B) {
	fopts := demo.DefaultFleetOptions()
	fopts.BasePort = 0
	fopts.Instances = 140
	fleet, err := demo.NewFleet(fopts)
	require.NoError(b, err)
	defer fleet.Close()
	s := openStore(b)
	for i := range fleet.Len() {
		s.loadText(b, bytes.NewReader(fleet.Instance(i).AppendMetrics(nil)), "vllm", fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250))
	}
	require.GreaterOrEqual(b, s.db.ActiveSeries(), 90000)
	cat, err := NewCatalog()
	require.NoError(b, err)
	ov := cat.Embedded()[0]
	b.ResetTimer()
	for range b.N {
		inv, err := cat.Discover(context.Background(), s.db, s.start.UnixMilli(), s.end.UnixMilli(), nil)
		require.NoError(b, err)
		d := cat.Resolve(ov, inv, Filter{})
		require.Len(b, d.Rows, 2)
	}
}
