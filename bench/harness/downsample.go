package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Downsampler is what an appliance reports of its downsampler, for a
// bench that waits until the rollups have caught up with imported data.
type Downsampler struct {
	// Lags lists each tier's lag behind now, "1m lag 42s, 5m lag 130s".
	Lags string
	// CaughtUp is whether every tier's lag is under 3 min (10 min for 5m).
	CaughtUp bool
	// Rows is appliance_downsample_rows_written_total, 0 before the first
	// rollup.
	Rows float64
}

// ReadDownsampler reads the appliance at base's /api/v1/status/tiers and
// the rollup rows counter on its /metrics.
func ReadDownsampler(ctx context.Context, client *http.Client, base string) (Downsampler, error) {
	var st struct {
		Data []struct {
			Tier       string   `json:"tier"`
			LagSeconds *float64 `json:"lagSeconds"`
		} `json:"data"`
	}
	url := base + "/api/v1/status/tiers"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Downsampler{}, fmt.Errorf("build request for %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Downsampler{}, fmt.Errorf("get %s: %w", url, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return Downsampler{}, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Downsampler{}, fmt.Errorf("get %s: %s: %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return Downsampler{}, fmt.Errorf("tiers status: %w", err)
	}
	rows, err := SumMetric(ctx, client, base+"/metrics", "appliance_downsample_rows_written_total")
	if err != nil && !errors.Is(err, ErrNoSuchMetric) {
		return Downsampler{}, err
	}
	d := Downsampler{CaughtUp: true, Rows: rows}
	var lags []string
	for _, t := range st.Data {
		if t.LagSeconds == nil {
			continue
		}
		lags = append(lags, fmt.Sprintf("%s lag %.0fs", t.Tier, *t.LagSeconds))
		limit := 180.0
		if t.Tier == "5m" {
			limit = 600
		}
		if *t.LagSeconds > limit {
			d.CaughtUp = false
		}
	}
	d.Lags = strings.Join(lags, ", ")
	return d, nil
}
