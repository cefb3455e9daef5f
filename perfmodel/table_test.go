package perfmodel

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func key(model string, bs, sf int) JobKey {
	return JobKey{Model: model, BatchSize: bs, ScaleFactor: sf}
}

func TestGavelIsolatedValues(t *testing.T) {
	tab := gavelSimulation()
	// Recommendation is faster on P100 and K80 than on V100 (gavel.md, section 3).
	rec := key("Recommendation", 1024, 1)
	for gt, want := range map[topology.GPUType]float64{topology.V100: 13.2825697082565, topology.P100: 30.74443726150114, topology.K80: 20.04995255198869} {
		got, err := tab.Throughput(rec, gt)
		require.NoError(t, err)
		assert.InDelta(t, want, got, 1e-12, gt)
	}
	// ResNet-18 bs16 scales superlinearly from 1 to 2 V100s.
	one, err := tab.Throughput(key("ResNet-18", 16, 1), topology.V100)
	require.NoError(t, err)
	two, err := tab.Throughput(key("ResNet-18", 16, 2), topology.V100)
	require.NoError(t, err)
	assert.InDelta(t, 32.353384328946916, one, 1e-12)
	assert.InDelta(t, 100.14206200421837, two, 1e-12)
	// K80 ResNet-50 bs128 cannot run at sf >= 2: a known zero, not an error.
	z, err := tab.Throughput(key("ResNet-50", 128, 2), topology.K80)
	require.NoError(t, err)
	assert.Zero(t, z)
	// A model without a batch size.
	a3c, err := tab.Throughput(key("A3C", 0, 1), topology.V100)
	require.NoError(t, err)
	assert.Greater(t, a3c, 0.0)
}

func TestGavelShape(t *testing.T) {
	tab := gavelSimulation()
	assert.Equal(t, []topology.GPUType{topology.K80, topology.P100, topology.V100}, tab.GPUTypes())
	jobs := tab.Jobs()
	assert.Len(t, jobs, 83)
	perSF := map[int]int{}
	for _, k := range jobs {
		perSF[k.ScaleFactor]++
	}
	assert.Equal(t, map[int]int{1: 26, 2: 19, 4: 19, 8: 19}, perSF)
	assert.Equal(t, []int{1, 2, 4, 8}, tab.ScaleFactors(key("LM", 20, 0)))
	assert.Equal(t, []int{1}, tab.ScaleFactors(key("Recommendation", 512, 0)))
	assert.Nil(t, tab.ScaleFactors(key("BERT", 32, 0)))
	for _, gt := range tab.GPUTypes() {
		for _, k := range jobs {
			v, err := tab.Throughput(k, gt)
			require.NoError(t, err, "%s on %s", k, gt)
			assert.GreaterOrEqual(t, v, 0.0)
		}
	}
}

func TestGavelPairsSymmetricAndCounted(t *testing.T) {
	tab := gavelSimulation()
	var single []JobKey
	for _, k := range tab.Jobs() {
		if k.ScaleFactor == 1 {
			single = append(single, k)
		}
	}
	require.Len(t, single, 26)
	// Infeasible pairs per type, as counted in gavel.md section 3.
	wantZero := map[topology.GPUType]int{topology.V100: 40, topology.P100: 20, topology.K80: 87}
	for _, gt := range tab.GPUTypes() {
		zero := 0
		for _, a := range single {
			for _, b := range single {
				ta, tb, err := tab.Colocated(a, b, gt)
				require.NoError(t, err)
				ra, rb, err := tab.Colocated(b, a, gt)
				require.NoError(t, err)
				assert.Equal(t, [2]float64{ta, tb}, [2]float64{rb, ra}, "%s with %s on %s", a, b, gt)
				if ta == 0 && tb == 0 {
					zero++
				}
			}
		}
		assert.Equal(t, wantZero[gt], zero, gt)
	}
	// A measured pair: ResNet-18 bs16 with ResNet-18 bs64 on V100.
	ta, tb, err := tab.Colocated(key("ResNet-18", 16, 1), key("ResNet-18", 64, 1), topology.V100)
	require.NoError(t, err)
	assert.InDelta(t, 32.353384328946916, ta, 1e-12)
	assert.InDelta(t, 24.093231895382736, tb, 1e-12)
	// Multi-GPU pairs are all [0, 0]; pairs across scale factors are absent.
	for _, pair := range [][2]JobKey{
		{key("ResNet-18", 16, 2), key("ResNet-18", 32, 2)},
		{key("ResNet-18", 16, 1), key("ResNet-18", 32, 2)},
	} {
		ta, tb, err := tab.Colocated(pair[0], pair[1], topology.P100)
		require.NoError(t, err)
		assert.Zero(t, ta)
		assert.Zero(t, tb)
	}
}

func TestGavelPhysicalDiffers(t *testing.T) {
	sim, phys := gavelSimulation(), gavelPhysical()
	diff := 0
	for _, gt := range sim.GPUTypes() {
		for _, k := range sim.Jobs() {
			a, err := sim.Throughput(k, gt)
			require.NoError(t, err)
			b, err := phys.Throughput(k, gt)
			require.NoError(t, err)
			if a != b {
				diff++
			}
			ua, errA := sim.Unconsolidated(k, gt)
			ub, errB := phys.Unconsolidated(k, gt)
			if errA == nil && errB == nil && ua != ub {
				diff++
			}
		}
	}
	assert.Equal(t, 73, diff)
	v, err := phys.Throughput(key("ResNet-50", 128, 1), topology.K80)
	require.NoError(t, err)
	assert.Zero(t, v)
	v, err = sim.Throughput(key("ResNet-50", 128, 1), topology.K80)
	require.NoError(t, err)
	assert.InDelta(t, 0.347, v, 0.001)
}

func TestUnconsolidated(t *testing.T) {
	tab := gavelSimulation()
	v, err := tab.Unconsolidated(key("ResNet-18", 16, 4), topology.V100)
	require.NoError(t, err)
	assert.Greater(t, v, 0.0)
	// k80_unconsolidated lacks ResNet-50 bs64 and bs128 above one GPU.
	_, err = tab.Unconsolidated(key("ResNet-50", 64, 2), topology.K80)
	assert.ErrorIs(t, err, ErrUnknownJob)
}

func TestLookupErrors(t *testing.T) {
	tab := gavelSimulation()
	tests := []struct {
		name string
		k    JobKey
		gt   topology.GPUType
		kind error
		msg  string
	}{
		{"unknown type", key("ResNet-18", 16, 1), topology.A100, ErrUnknownGPUType, "ResNet-18 (batch size 16) x1 on a100: unknown GPU type: the table has k80, p100, v100"},
		{"unknown scale factor", key("ResNet-18", 16, 3), topology.V100, ErrUnknownJob, "the table has ResNet-18 (batch size 16) at scale factors 1, 2, 4, 8"},
		{"not distributed", key("Recommendation", 512, 2), topology.V100, ErrUnknownJob, "at scale factors 1"},
		{"unknown batch size", key("ResNet-50", 256, 1), topology.V100, ErrUnknownJob, "the table has ResNet-50 at batch sizes 16, 32, 64, 128"},
		{"unknown model", key("BERT", 32, 1), topology.V100, ErrUnknownJob, "the table has the models A3C, CycleGAN, LM, Recommendation, ResNet-18, ResNet-50, Transformer"},
		{"zero scale factor", key("ResNet-18", 16, 0), topology.V100, ErrInvalidJob, "scale factor 0"},
		{"negative batch", key("ResNet-18", -16, 1), topology.V100, ErrInvalidJob, "batch size -16 (want 0 to 1073741824)"},
		{"huge batch", key("ResNet-18", 1<<40, 1), topology.V100, ErrInvalidJob, "batch size 1099511627776 (want 0 to 1073741824)"},
		{"huge scale factor", key("ResNet-18", 16, 1<<21), topology.V100, ErrInvalidJob, "scale factor 2097152 (want 1 to 1048576)"},
		{"no model", key("", 16, 1), topology.V100, ErrInvalidJob, "no name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tab.Throughput(tc.k, tc.gt)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.msg)
			_, _, err = tab.Colocated(tc.k, key("ResNet-18", 16, 1), tc.gt)
			assert.ErrorIs(t, err, tc.kind)
			_, _, err = tab.Colocated(key("ResNet-18", 16, 1), tc.k, tc.gt)
			assert.ErrorIs(t, err, tc.kind)
		})
	}
	_, _, err := tab.Colocated(key("ResNet-18", 16, 1), key("BERT", 8, 1), topology.V100)
	assert.EqualError(t, err, "perfmodel: BERT (batch size 8) x1 with ResNet-18 (batch size 16) x1 on v100: unknown job: the table has the models A3C, CycleGAN, LM, Recommendation, ResNet-18, ResNet-50, Transformer")
}

func TestParseJobType(t *testing.T) {
	k, err := ParseJobType("ResNet-18 (batch size 16)", 4)
	require.NoError(t, err)
	assert.Equal(t, key("ResNet-18", 16, 4), k)
	assert.Equal(t, "ResNet-18 (batch size 16) x4", k.String())
	assert.Equal(t, "ResNet-18 (batch size 16)", k.Name())
	k, err = ParseJobType(" CycleGAN ", 1)
	require.NoError(t, err)
	assert.Equal(t, key("CycleGAN", 0, 1), k)
	assert.Equal(t, key("CycleGAN", 0, 8), k.WithScaleFactor(8))
	for _, bad := range []struct {
		name string
		sf   int
	}{
		{"ResNet-18 (batch size x)", 1}, {"ResNet-18 (batch size 16", 1}, {"ResNet-18 (batch size 0)", 1},
		{"ResNet-18 (batch size +4)", 1}, {"", 1}, {"LM", 0}, {" (batch size 4)", 1},
	} {
		_, err := ParseJobType(bad.name, bad.sf)
		assert.ErrorIs(t, err, ErrInvalidJob, bad.name)
	}
}

const tinyTable = `{
 "v100": {"('A (batch size 2)', 1)": {"null": 10, "('A (batch size 2)', 1)": [4, 4], "('B', 1)": [6, 3]},
          "('B', 1)": {"null": 8, "('A (batch size 2)', 1)": [3, 6]}},
 "v100_unconsolidated": {"('A (batch size 2)', 1)": {"null": 9}},
 "t4": {"('B', 1)": {"null": 2}}
}`

func TestParseGavelJSON(t *testing.T) {
	tab, err := ReadGavelJSON(strings.NewReader(tinyTable))
	require.NoError(t, err)
	assert.Equal(t, []topology.GPUType{topology.T4, topology.V100}, tab.GPUTypes())
	a, b := key("A", 2, 1), key("B", 0, 1)
	ta, tb, err := tab.Colocated(a, b, topology.V100)
	require.NoError(t, err)
	assert.Equal(t, [2]float64{6, 3}, [2]float64{ta, tb})
	v, err := tab.Unconsolidated(a, topology.V100)
	require.NoError(t, err)
	assert.Equal(t, 9.0, v)
	_, err = tab.Unconsolidated(b, topology.T4)
	assert.ErrorIs(t, err, ErrUnknownGPUType)
	// A is in the table, but not measured on T4.
	_, err = tab.Throughput(a, topology.T4)
	assert.ErrorIs(t, err, ErrUnknownJob)
	assert.Contains(t, err.Error(), "no rate for this job on this type")
	// The interfaces are met.
	var _ ThroughputModel = tab
	var _ ColocationModel = tab
}

func TestParseGavelJSONErrors(t *testing.T) {
	tests := []struct{ name, data, msg string }{
		{"not JSON", `{`, "line 1, column 2: malformed throughput table: unexpected end of the document (truncated?)"},
		{"empty", `{}`, "no GPU types"},
		{"only unconsolidated", `{"v100_unconsolidated": {}}`, "only unconsolidated"},
		{"unconsolidated without base", `{"k80": {}, "v100_unconsolidated": {}}`, `no worker type "v100"`},
		{"bad type", `{"V 100": {}}`, "not allowed"},
		{"upper-case type", `{"V100": {}}`, "lower case"},
		{"bad key", `{"v100": {"ResNet": {"null": 1}}}`, "want ('<job type>', <scale factor>)"},
		{"bad scale factor", `{"v100": {"('A', x)": {"null": 1}}}`, "not an integer"},
		{"zero scale factor", `{"v100": {"('A', 0)": {"null": 1}}}`, "scale factor 0"},
		{"no isolated", `{"v100": {"('A', 1)": {"('A', 1)": [1, 1]}}}`, `no isolated ("null") rate`},
		{"negative", `{"v100": {"('A', 1)": {"null": -1}}}`, "rate -1"},
		{"pair as null", `{"v100": {"('A', 1)": {"null": [1, 2]}}}`, "must be a number"},
		{"number as pair", `{"v100": {"('A', 1)": {"null": 1, "('A', 1)": 3}}}`, "needs [self, other]"},
		{"three rates", `{"v100": {"('A', 1)": {"null": 1, "('A', 1)": [1, 2, 3]}}}`, "needs 2 rates"},
		{"unknown partner", `{"v100": {"('A', 1)": {"null": 1, "('C', 1)": [1, 2]}}}`, "C x1, which has no isolated entry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGavelJSON([]byte(tc.data))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMalformedTable)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func FuzzParseGavelJSON(f *testing.F) {
	f.Add([]byte(tinyTable))
	f.Add([]byte(`{"v100": {"('A', 1)": {"null": 1, "('C', 1)": [1, 2]}}}`))
	f.Add([]byte("\ufeff{\"v100\": {\"('A', 1)\": {\"null\": 1e-300, \"null\": 2}}}"))
	f.Add([]byte(`{"v100": {"('A (batch size 99999999999)', 2000000)": {"null": 1e308}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseGavelJSON(data)
		if err != nil {
			return
		}
		for _, gt := range tab.GPUTypes() {
			for _, k := range tab.Jobs() {
				v, err := tab.Throughput(k, gt)
				if err == nil && v != 0 && !(v >= MinRate && v <= MaxRate) {
					t.Fatalf("rate %v out of range", v)
				}
				if _, _, err := tab.Colocated(k, k, gt); err != nil && !bytes.Contains([]byte(err.Error()), []byte("perfmodel:")) {
					t.Fatalf("odd error %v", err)
				}
			}
		}
	})
}

func TestExtrapolated(t *testing.T) {
	e := Extrapolated{Table: gavelSimulation()}
	k8 := key("ResNet-50", 64, 8)
	v8, err := e.Throughput(k8, topology.V100)
	require.NoError(t, err)
	v32, err := e.Throughput(k8.WithScaleFactor(32), topology.V100)
	require.NoError(t, err)
	assert.InDelta(t, 4*v8, v32, 1e-9)
	v6, err := e.Throughput(k8.WithScaleFactor(6), topology.V100)
	require.NoError(t, err)
	v4, err := gavelSimulation().Throughput(k8.WithScaleFactor(4), topology.V100)
	require.NoError(t, err)
	assert.InDelta(t, 1.5*v4, v6, 1e-9)
	// Recommendation was only measured on one GPU: 2 GPUs are twice one.
	r2, err := e.Throughput(key("Recommendation", 1024, 2), topology.P100)
	require.NoError(t, err)
	assert.InDelta(t, 2*30.74443726150114, r2, 1e-9)
	_, err = e.Throughput(key("BERT", 8, 2), topology.V100)
	assert.ErrorIs(t, err, ErrUnknownJob)
	_, err = e.Throughput(k8, topology.A100)
	assert.ErrorIs(t, err, ErrUnknownGPUType)
	// Beyond the largest cluster there is nothing to extrapolate to: a
	// scale factor of 2^44 used to give 2e19 steps/s.
	for _, sf := range []int{topology.MaxClusterGPUs + 1, 1 << 44, math.MaxInt} {
		v, err := e.Throughput(k8.WithScaleFactor(sf), topology.V100)
		require.ErrorIs(t, err, ErrInvalidJob, "%v steps/s", v)
		assert.ErrorContains(t, err, "(want 1 to 1048576)")
	}
	vMax, err := e.Throughput(k8.WithScaleFactor(topology.MaxClusterGPUs), topology.V100)
	require.NoError(t, err)
	assert.InDelta(t, float64(topology.MaxClusterGPUs/8)*v8, vMax, 1e-6*vMax)
}

func FuzzParseJobType(f *testing.F) {
	f.Add("ResNet-18 (batch size 16)", 1)
	f.Add("A3C", 8)
	f.Add("X (batch size 99999999999)", 2000000)
	f.Fuzz(func(t *testing.T, name string, sf int) {
		k, err := ParseJobType(name, sf)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "perfmodel: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		if k.Validate() != nil || k.ScaleFactor > maxScaleFactor || k.BatchSize > maxBatchSize || len(k.Model) > maxJobName {
			t.Fatalf("accepted %+v", k)
		}
		back, err := ParseJobType(k.Name(), k.ScaleFactor)
		if err != nil || back != k {
			t.Fatalf("round trip of %+v: %+v, %v", k, back, err)
		}
	})
}
