package notify

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		// The crashing child of TestKillNineBetweenSendAndAck exits
		// mid-test; there is nothing to check for it.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}
