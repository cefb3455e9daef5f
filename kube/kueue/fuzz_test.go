package kueue_test

import (
	"math"
	"testing"

	"github.com/gpusched/gpusched/kube/kueue"
)

// FuzzReadWorkload: whatever a tenant writes in its pod template's
// annotations and node selector, a Workload is read (rates within the
// admin's ratio, at most 1 on the fastest type) or refused with an error,
// never a panic.
func FuzzReadWorkload(f *testing.F) {
	f.Add("v100=3.2,k80=1", "", "", "", "", int64(1))
	f.Add("", "ResNet-50", "64", "v100,k80", "Tesla-K80", int64(2))
	f.Add("v100=fast", "", "", "", "", int64(1))
	f.Add("", "ResNet-50", "lots", "", "Tesla-V100-SXM2-16GB", int64(8))
	f.Add("k80=1e300,v100=1e-300", "", "", ",,", "A100", int64(0))
	f.Fuzz(func(t *testing.T, tput, kind, batch, types, selector string, gpus int64) {
		ann := map[string]string{}
		for k, v := range map[string]string{"gpusched.io/throughput": tput, "gpusched.io/job-kind": kind, "gpusched.io/batch-size": batch, "gpusched.io/gpu-types": types} {
			if v != "" {
				ann[k] = v
			}
		}
		gpus = max(0, min(gpus, 1<<20))
		ours, rates, err := kueue.ReadOne(ann, selector, gpus)
		if err != nil || !ours {
			return
		}
		for _, r := range rates {
			if !(r >= 0 && r <= 1) || math.IsNaN(r) {
				t.Fatalf("rate %v out of [0, 1]: %v", r, rates)
			}
			if r > 0 && r < 0.1-1e-9 {
				t.Fatalf("rate %v below the admin's 1/10: %v", r, rates)
			}
		}
	})
}
