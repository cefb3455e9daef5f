package tenancy

import (
	"sync"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Tenancy is read from many goroutines at once (run with -race): the
// controllers resolve workloads while others read its weights and quotas.
func TestConcurrentReads(t *testing.T) {
	ten, err := Parse([]byte(exampleConfigMap(t).Data[ConfigKey]))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				p, err := ten.Resolve([]string{"vision", "nlp", "course-101"}[i%3], nil)
				assert.NoError(t, err)
				assert.NotNil(t, p.Queue)
				_ = ten.Weights()
				_ = ten.Quotas()
				_ = p.Tenant.Namespaces()
				r, _ := ten.Rates().Trusted(map[topology.GPUType]float64{topology.V100: 3, topology.K80: 1}, []topology.GPUType{topology.K80, topology.V100})
				assert.Len(t, r, 2)
			}
		}()
	}
	wg.Wait()
}
