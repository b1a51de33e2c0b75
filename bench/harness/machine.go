package harness

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
)

// Machine describes the host a benchmark ran on, for the report.
type Machine struct {
	CPUs     int    // logical CPUs this process may use
	CPUModel string // "model name" from /proc/cpuinfo
	MemTotal string // "MemTotal" from /proc/meminfo
	Kernel   string
	Go       string
}

// ReadMachine gathers what it can; a field it cannot read is left "?".
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), CPUModel: "?", MemTotal: "?", Kernel: "?", Go: runtime.Version()}
	if v, ok := procField("/proc/cpuinfo", "model name"); ok {
		m.CPUModel = v
	}
	if v, ok := procField("/proc/meminfo", "MemTotal"); ok {
		m.MemTotal = v
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func (m Machine) String() string {
	return fmt.Sprintf("%d CPUs (%s), %s RAM, Linux %s, %s", m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.Go)
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for a child process to listen on. Another process may take it in
// between; a benchmark then fails to start that system and says so.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("release port %s: %w", addr, err)
	}
	return addr, nil
}

// LoadAverage is "1m 5m 15m" from /proc/loadavg, or "?": what a report
// says of the other work on a shared machine during a run.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
