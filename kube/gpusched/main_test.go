package gpusched

import (
	"os"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

func TestMain(m *testing.M) {
	metrics.Register() // the framework records into the scheduler's metrics
	os.Exit(m.Run())
}
