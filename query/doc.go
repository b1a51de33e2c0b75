// Package query runs PromQL with Prometheus' engine under the appliance's limits.
package query
