package config

// ProbeConfig is one entry of the probes section: an outside-in HTTP or
// LLM streaming probe. Until it is filled in, any key is refused.
type ProbeConfig struct{}
