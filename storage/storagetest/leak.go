package storagetest

import "go.uber.org/goleak"

// LeakOptions are the goleak options of a test binary that links package
// storage: they ignore, by their exact top function, the goroutines that
// VictoriaMetrics' lib/ packages start from their package init functions
// and never stop (the coarse clocks of fasttime and timeutil, the cleaners
// of the process-wide block and LRU caches, the interned-string map's
// cleaner and the log throttlers). No API of VictoriaMetrics stops them;
// every goroutine a storage.DB starts itself must still be gone after
// Close, and goleak checks that.
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(m, storagetest.LeakOptions()...)
//	}
func LeakOptions() []goleak.Option {
	const vm = "github.com/VictoriaMetrics/VictoriaMetrics/lib/"
	return []goleak.Option{
		goleak.IgnoreTopFunction(vm + "fasttime.init.0.func1"),
		goleak.IgnoreTopFunction(vm + "timeutil.init.0.func1"),
		goleak.IgnoreTopFunction(vm + "blockcache.(*Cache).cleaner"),
		goleak.IgnoreTopFunction(vm + "lrucache.(*Cache).cleaner"),
		goleak.IgnoreTopFunction(vm + "bytesutil.newInternStringMap.func1"),
		goleak.IgnoreTopFunction(vm + "logger.newLogThrottler.func1"),
	}
}
