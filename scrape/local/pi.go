package local

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// vcgencmdTimeout bounds one vcgencmd run (it answers in milliseconds).
const vcgencmdTimeout = 5 * time.Second

var (
	famThrottled = gauge("appliance_throttled",
		"Raspberry Pi throttle flags now, from vcgencmd get_throttled (1 active, 0 not), by flag: under_voltage, arm_frequency_capped, throttled, soft_temp_limit.")
	famThrottledOccurred = gauge("appliance_throttled_occurred",
		"Raspberry Pi throttle flags since boot, from vcgencmd get_throttled (1 has occurred, 0 not), by flag.")
)

// throttleFlags are get_throttled's bits 0-3 (now); bits 16-19 say the
// same since boot.
var throttleFlags = []string{"under_voltage", "arm_frequency_capped", "throttled", "soft_temp_limit"}

// readThrottled runs `vcgencmd get_throttled` (a Raspberry Pi's firmware
// tool) and adds its flags. No vcgencmd on PATH, or one that fails (not
// a Pi, no /dev/vchiq), adds nothing.
func readThrottled(ctx context.Context, b *batch, cmd string) {
	if cmd == "" {
		return
	}
	path, err := exec.LookPath(cmd)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, vcgencmdTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, path, "get_throttled")
	c.WaitDelay = time.Second
	out, err := c.Output()
	if err != nil {
		return
	}
	bits, ok := parseThrottled(out)
	if !ok {
		return
	}
	for i, f := range throttleFlags {
		b.add(famThrottled, float64(bits>>i&1), "flag", f)
		b.add(famThrottledOccurred, float64(bits>>(16+i)&1), "flag", f)
	}
}

// parseThrottled reads "throttled=0x50005".
func parseThrottled(out []byte) (uint64, bool) {
	s := strings.TrimSpace(string(bytes.TrimSpace(out)))
	v, ok := strings.CutPrefix(s, "throttled=")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(v), "0x"), 16, 32)
	return n, err == nil
}
