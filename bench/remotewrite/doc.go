// Command remotewrite measures remote write out: the appliance and vmagent
// (v1.151.0, built from the Go module proxy) scrape the same simulated
// fleet one after the other and remote-write it (Prometheus' protocol,
// snappy protobuf 1.0) to a receiver in this process, which decodes and
// counts every sample. For each it reports the samples sent per second in
// the steady state, the CPU seconds per million samples sent, and, after
// the receiver answered 503 for -outage, how fast the backlog drains. The
// appliance runs a second time without remote_write, so that the cost of
// remote write itself (with minus without) is reported beside its total
// (which includes storing every sample, as vmagent does not).
//
//	go run ./bench/remotewrite -short   # 20k series, about 5 min
//	go run ./bench/remotewrite          # 100k series
//
// The report is printed and written to bench/out/remotewrite-<time>.md.
package main
