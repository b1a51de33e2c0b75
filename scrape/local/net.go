package local

import (
	"os"
	"path/filepath"
	"strings"
)

// netFields are the /proc/net/dev columns node_exporter exports by default.
var netFields = []struct {
	col int
	fam family
}{
	{0, counter("node_network_receive_bytes_total", "Network device statistic receive_bytes.")},
	{1, counter("node_network_receive_packets_total", "Network device statistic receive_packets.")},
	{2, counter("node_network_receive_errs_total", "Network device statistic receive_errs.")},
	{3, counter("node_network_receive_drop_total", "Network device statistic receive_drop.")},
	{8, counter("node_network_transmit_bytes_total", "Network device statistic transmit_bytes.")},
	{9, counter("node_network_transmit_packets_total", "Network device statistic transmit_packets.")},
	{10, counter("node_network_transmit_errs_total", "Network device statistic transmit_errs.")},
	{11, counter("node_network_transmit_drop_total", "Network device statistic transmit_drop.")},
}

// readNetDev reads /proc/net/dev.
func readNetDev(b *batch, proc string) {
	data, err := os.ReadFile(filepath.Join(proc, "net", "dev"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		dev, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		dev = strings.TrimSpace(dev)
		f := strings.Fields(rest)
		if dev == "" || len(f) < 16 {
			continue
		}
		for _, nf := range netFields {
			addParsed(b, nf.fam, f[nf.col], "device", dev)
		}
	}
}
