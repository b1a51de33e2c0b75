package local

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// nvidiaSMITimeout bounds one nvidia-smi run; it takes 50-500 ms on a
// healthy box and hangs when the driver does.
const nvidiaSMITimeout = 10 * time.Second

// gpuColumns is the --query-gpu list, in the order of the query the
// fixture nvidia-smi-query.csv answers.
var gpuColumns = []string{
	"index", "uuid", "name", "pci.bus_id", "driver_version", "pstate",
	"temperature.gpu", "temperature.memory", "utilization.gpu", "utilization.memory",
	"memory.total", "memory.reserved", "memory.used", "memory.free",
	"power.draw", "power.limit", "clocks.current.sm", "clocks.current.memory", "clocks.max.sm",
	"clocks_event_reasons.active",
	"clocks_event_reasons.gpu_idle", "clocks_event_reasons.sw_power_cap", "clocks_event_reasons.hw_slowdown",
	"clocks_event_reasons.hw_thermal_slowdown", "clocks_event_reasons.hw_power_brake_slowdown",
	"clocks_event_reasons.sw_thermal_slowdown",
	"fan.speed",
}

// gpuValues maps a column to its series. Names are the DCGM exporter's
// (default-counters.csv and DCGM's field list) so that GPU rules work with
// DCGM exporter or without it; units are DCGM's too (MiB, W, MHz, C, %).
var gpuValues = map[string]family{
	"pstate":                      gauge("nvidia_smi_pstate", "Performance state of the GPU (0 is P0, the fastest)."),
	"temperature.gpu":             gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
	"temperature.memory":          gauge("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C)."),
	"utilization.gpu":             gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
	"utilization.memory":          gauge("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."),
	"memory.total":                gauge("DCGM_FI_DEV_FB_TOTAL", "Framebuffer memory total (in MiB)."),
	"memory.reserved":             gauge("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB)."),
	"memory.used":                 gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
	"memory.free":                 gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
	"power.draw":                  gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
	"power.limit":                 gauge("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W)."),
	"clocks.current.sm":           gauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
	"clocks.current.memory":       gauge("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz)."),
	"clocks.max.sm":               gauge("DCGM_FI_DEV_MAX_SM_CLOCK", "Maximum SM clock frequency (in MHz)."),
	"clocks_event_reasons.active": gauge("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Bitmask of the reasons the clocks are held down (0x1 idle, 0x4 sw power cap, 0x8 hw slowdown, 0x20 sw thermal, 0x40 hw thermal, 0x80 power brake)."),
	"fan.speed":                   gauge("DCGM_FI_DEV_FAN_SPEED", "Fan speed (in %)."),
}

// famClockReason has no DCGM counterpart: DCGM exports only the bitmask.
var famClockReason = gauge("nvidia_smi_clocks_event_reason_active", "Whether a reason holds the GPU clocks down (1) or not (0), by reason.")

// gpuReader runs nvidia-smi. Drivers before 535 call the clock reasons
// clocks_throttle_reasons.*; the reader tries the new names first and
// falls back to the old ones for good when the driver refuses them.
type gpuReader struct {
	cmd      string
	hostname string
	logger   *slog.Logger

	mu       sync.Mutex
	throttle bool // use clocks_throttle_reasons.*
	warned   bool
}

func newGPUReader(cmd, hostname string, logger *slog.Logger) *gpuReader {
	if cmd == "" {
		cmd = "nvidia-smi"
	}
	return &gpuReader{cmd: cmd, hostname: hostname, logger: logger}
}

func queryFields(throttle bool) []string {
	q := make([]string, len(gpuColumns))
	for i, c := range gpuColumns {
		if throttle {
			c = strings.Replace(c, "clocks_event_reasons.", "clocks_throttle_reasons.", 1)
		}
		q[i] = c
	}
	return q
}

// read adds one series per field and GPU. No nvidia-smi on PATH, or one
// that fails (no driver, no GPU), adds nothing.
func (g *gpuReader) read(ctx context.Context, b *batch) {
	path, err := exec.LookPath(g.cmd)
	if err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out, err := g.run(ctx, path, g.throttle)
	if err != nil && !g.throttle && bytes.Contains(out, []byte("not a valid field")) {
		if out2, err2 := g.run(ctx, path, true); err2 == nil {
			g.throttle, out, err = true, out2, nil
		}
	}
	if err != nil {
		if !g.warned {
			g.logger.Info("nvidia-smi found but not answering; no GPU readings", "cmd", path, "err", err, "output", string(firstLine(out)))
			g.warned = true
		}
		return
	}
	parseGPUQuery(b, out, g.hostname)
}

func (g *gpuReader) run(ctx context.Context, path string, throttle bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, nvidiaSMITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--query-gpu="+strings.Join(queryFields(throttle), ","), "--format=csv,noheader,nounits")
	cmd.WaitDelay = time.Second
	return cmd.CombinedOutput()
}

func firstLine(b []byte) []byte {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return line
}

// parseGPUQuery parses the CSV nvidia-smi prints: one line per GPU, fields
// separated by ", ", unsupported ones "[N/A]" or "[Not Supported]".
func parseGPUQuery(b *batch, out []byte, hostname string) {
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ", ")
		if len(f) != len(gpuColumns) {
			continue
		}
		col := make(map[string]string, len(f))
		for i, c := range gpuColumns {
			col[c] = strings.TrimSpace(f[i])
		}
		idx := col["index"]
		if _, err := strconv.Atoi(idx); err != nil {
			continue
		}
		kv := []string{"gpu", idx, "UUID", col["uuid"], "modelName", col["name"], "pci_bus_id", col["pci.bus_id"],
			"device", "nvidia" + idx, "DCGM_FI_DRIVER_VERSION", col["driver_version"], "Hostname", hostname}
		for _, c := range gpuColumns {
			if fam, ok := gpuValues[c]; ok {
				if v, ok := gpuValue(col[c]); ok {
					b.add(fam, v, kv...)
				}
				continue
			}
			reason, ok := strings.CutPrefix(c, "clocks_event_reasons.")
			if !ok {
				continue
			}
			switch col[c] {
			case "Active":
				b.add(famClockReason, 1, append(kv, "reason", reason)...)
			case "Not Active":
				b.add(famClockReason, 0, append(kv, "reason", reason)...)
			}
		}
	}
}

// gpuValue parses a number, a hex bitmask (0x...) or a P-state (P0..P15).
func gpuValue(s string) (float64, bool) {
	switch {
	case s == "" || strings.HasPrefix(s, "[") || s == "N/A":
		return 0, false
	case strings.HasPrefix(s, "0x"):
		v, err := strconv.ParseUint(s[2:], 16, 64)
		return float64(v), err == nil
	case len(s) > 1 && s[0] == 'P':
		v, err := strconv.Atoi(s[1:])
		return float64(v), err == nil
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}
