package harness

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/demo"
)

func TestFleetSeriesPerScrape(t *testing.T) {
	// Zero fields take the demo's defaults; BasePort 0 picks free ports.
	f, err := StartFleet(t.Context(), demo.FleetOptions{Instances: 3})
	require.NoError(t, err)
	defer f.Stop()

	client := testClient()
	n, err := SeriesPerScrape(t.Context(), client, f.Targets())
	require.NoError(t, err)
	// The instances' pages may grow between two scrapes (new label values
	// as requests come in), never shrink: count them one by one after.
	sum := 0
	for _, target := range f.Targets() {
		c, err := CountSeries(t.Context(), client, "http://"+target+"/metrics")
		require.NoError(t, err)
		require.Positive(t, c)
		sum += c
	}
	require.Positive(t, n)
	require.LessOrEqual(t, n, sum)

	require.NoError(t, f.Stop())
	require.NoError(t, f.Stop(), "a second Stop is safe")
	_, err = SeriesPerScrape(t.Context(), client, f.Targets())
	require.ErrorContains(t, err, "connection refused", "a stopped fleet serves nothing")
}
