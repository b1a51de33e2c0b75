package config

// AlertingConfig is the alerting section: Alertmanager's route tree,
// receivers, inhibit rules and time intervals, plus the P2 digest.
// Until it is filled in, any key in it is refused as unknown.
type AlertingConfig struct{}
