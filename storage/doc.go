// Package storage is the appliance's embedded time-series store and the only
// importer of VictoriaMetrics' lib/ packages.
package storage
