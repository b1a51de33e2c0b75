package cardinality

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/aiserve/appliance/storage/storagetest"
)

// TestMain fails the package's tests if a goroutine outlives them, other
// than VictoriaMetrics' process-wide ones (see storagetest.LeakOptions).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storagetest.LeakOptions()...)
}
