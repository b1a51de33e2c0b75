package config

// CollectorsConfig switches the local readings (host, thermal, GPU).
type CollectorsConfig struct{}

// DefaultCollectorsConfig has every local reading on.
var DefaultCollectorsConfig = CollectorsConfig{}

// AutodetectConfig controls the auto-detection of local model servers.
type AutodetectConfig struct{}

// DefaultAutodetectConfig has auto-detection on.
var DefaultAutodetectConfig = AutodetectConfig{}
