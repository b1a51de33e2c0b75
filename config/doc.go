// Package config loads, validates and defaults the appliance's one YAML file.
package config
