// Package e2e holds end-to-end tests that build the real appliance binary,
// start it as a user would, point it at real HTTP servers and talk to it
// only through its HTTP API, its exit codes and its output.
package e2e
