package local

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of the times in /proc/stat. It is 100 on every Linux
// architecture the appliance targets (sysconf(_SC_CLK_TCK)); node_exporter
// assumes the same.
const userHZ = 100

var (
	famCPU       = counter("node_cpu_seconds_total", "Seconds the CPUs spent in each mode.")
	famBootTime  = gauge("node_boot_time_seconds", "Node boot time, in unixtime.")
	famCtxt      = counter("node_context_switches_total", "Total number of context switches.")
	famIntr      = counter("node_intr_total", "Total number of interrupts serviced.")
	famForks     = counter("node_forks_total", "Total number of forks.")
	famRunning   = gauge("node_procs_running", "Number of processes in runnable state.")
	famBlocked   = gauge("node_procs_blocked", "Number of processes blocked waiting for I/O to complete.")
	famLoad1     = gauge("node_load1", "1m load average.")
	famLoad5     = gauge("node_load5", "5m load average.")
	famLoad15    = gauge("node_load15", "15m load average.")
	cpuModes     = []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
	statCounters = map[string]family{"ctxt": famCtxt, "intr": famIntr, "processes": famForks}
)

// readCPU reads /proc/stat: per-CPU times by mode, boot time, context
// switches, interrupts, forks and process counts.
func readCPU(b *batch, proc string) {
	data, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch key := f[0]; {
		case strings.HasPrefix(key, "cpu") && key != "cpu":
			cpu := key[3:]
			for i, mode := range cpuModes {
				if i+1 >= len(f) {
					break
				}
				if v, err := strconv.ParseFloat(f[i+1], 64); err == nil {
					b.add(famCPU, v/userHZ, "cpu", cpu, "mode", mode)
				}
			}
		case key == "btime":
			addParsed(b, famBootTime, f[1])
		case key == "procs_running":
			addParsed(b, famRunning, f[1])
		case key == "procs_blocked":
			addParsed(b, famBlocked, f[1])
		default:
			if fam, ok := statCounters[key]; ok {
				addParsed(b, fam, f[1])
			}
		}
	}
}

func addParsed(b *batch, f family, s string, kv ...string) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		b.add(f, v, kv...)
	}
}

// readMeminfo reads /proc/meminfo as node_exporter does: every field
// becomes node_memory_<Field>_bytes (kB times 1024), or node_memory_<Field>
// for counts such as HugePages_Total; "Active(anon)" becomes Active_anon.
func readMeminfo(b *batch, proc string) {
	data, err := os.ReadFile(filepath.Join(proc, "meminfo"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		name = strings.NewReplacer("(", "_", ")", "").Replace(strings.TrimSpace(name))
		metric := "node_memory_" + name
		if len(f) == 2 && f[1] == "kB" {
			metric += "_bytes"
			v *= 1024
		}
		b.add(gauge(metric, "Memory information field "+name+"."), v)
	}
}

// readLoad reads /proc/loadavg.
func readLoad(b *batch, proc string) {
	data, err := os.ReadFile(filepath.Join(proc, "loadavg"))
	if err != nil {
		return
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return
	}
	for i, fam := range []family{famLoad1, famLoad5, famLoad15} {
		addParsed(b, fam, f[i])
	}
}
