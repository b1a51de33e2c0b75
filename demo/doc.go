// Package demo simulates a fleet of vLLM-like model servers on localhost.
package demo
