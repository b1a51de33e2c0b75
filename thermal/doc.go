// Package thermal answers "is the box too hot, and does the model slow
// down when it is?" for the /hardware page: the box's temperatures (GPU
// from the GPU readings, hwmon sensors, thermal zones) and the model's
// inference P95 over the same range, the throttle thresholds, and the
// spans when the hardware throttled: a Raspberry Pi's flags from
// `vcgencmd get_throttled` (appliance_throttled{flag}, package
// scrape/local) and NVIDIA's thermal clock reasons
// (nvidia_smi_clocks_event_reason_active, or the DCGM exporter's
// clock-reasons bitmask). For detection-style workloads
// (one inference per frame) it adds the frame rate and the frame-time
// jitter, P99 − P50 of the per-frame histogram: a detector's problem is
// instability more than its average.
//
// Everything is read through PromQL only, over a Querier (the appliance's
// query engine in production), as package explain does.
//
// The thresholds drawn are what the hardware documents: a Raspberry Pi's
// cpu-thermal zone throttles at 80 °C (the firmware's soft limit begins
// at 80 °C); for NVIDIA GPUs the hardware page's 85 °C line, near where
// data-centre GPUs start their thermal slowdown (the exact slowdown
// temperature is per board and not among the GPU readings).
package thermal
