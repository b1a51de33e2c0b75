package remotewrite

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them; the ignored ones
// are VictoriaMetrics' process-wide goroutines (the storage's).
func TestMain(m *testing.M) {
	const vm = "github.com/VictoriaMetrics/VictoriaMetrics/lib/"
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction(vm+"fasttime.init.0.func1"),
		goleak.IgnoreTopFunction(vm+"timeutil.init.0.func1"),
		goleak.IgnoreTopFunction(vm+"blockcache.(*Cache).cleaner"),
		goleak.IgnoreTopFunction(vm+"lrucache.(*Cache).cleaner"),
		goleak.IgnoreTopFunction(vm+"bytesutil.newInternStringMap.func1"),
		goleak.IgnoreTopFunction(vm+"logger.newLogThrottler.func1"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
