package storage

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them. The
// ignored ones are VictoriaMetrics' process-wide goroutines, started by its
// packages' init functions and never stopped; storagetest.LeakOptions has
// the same list for the other packages (this one cannot import it).
func TestMain(m *testing.M) {
	const vm = "github.com/VictoriaMetrics/VictoriaMetrics/lib/"
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction(vm+"fasttime.init.0.func1"),
		goleak.IgnoreTopFunction(vm+"timeutil.init.0.func1"),
		goleak.IgnoreTopFunction(vm+"blockcache.(*Cache).cleaner"),
		goleak.IgnoreTopFunction(vm+"lrucache.(*Cache).cleaner"),
		goleak.IgnoreTopFunction(vm+"bytesutil.newInternStringMap.func1"),
		goleak.IgnoreTopFunction(vm+"logger.newLogThrottler.func1"),
	)
}
