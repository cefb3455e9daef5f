package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guideRow is one row of a table of NVIDIA's MIG user guide ("Supported MIG
// Profiles", release 580/590), transcribed a second time, independently of
// migtables.go: name, fraction of memory as memory slices (A30: of 4, the
// others: of 8), copy engines, NVDECs, NVJPGs, OFAs, instances available.
type guideRow struct {
	name                   string
	mem, ce, dec, jpeg, of int
	instances              int
}

var guide = map[string][]guideRow{
	// Table: A30-24GB.
	"a30-24gb": {{"1g.6gb", 1, 1, 0, 0, 0, 4}, {"1g.6gb+me", 1, 1, 1, 1, 1, 1}, {"2g.12gb", 2, 2, 2, 0, 0, 2}, {"2g.12gb+me", 2, 2, 2, 1, 1, 1}, {"4g.24gb", 4, 4, 4, 1, 1, 1}},
	// Table: A100-SXM4-40GB. The guide prints 1/8 as the memory fraction
	// of 1g.10gb, but its own nvidia-smi mig -lgipp listing gives it two
	// memory slices ({0,2,4,6}:2), as does the name (10 of 40 GB).
	"a100-40gb": {{"1g.5gb", 1, 1, 0, 0, 0, 7}, {"1g.5gb+me", 1, 1, 1, 1, 1, 1}, {"1g.10gb", 2, 1, 1, 0, 0, 4}, {"2g.10gb", 2, 2, 1, 0, 0, 3}, {"3g.20gb", 4, 3, 2, 0, 0, 2}, {"4g.20gb", 4, 4, 2, 0, 0, 1}, {"7g.40gb", 8, 7, 5, 1, 1, 1}},
	// A100-SXM4-80GB: the same table, names changed by memory proportion.
	"a100-80gb":  {{"1g.10gb", 1, 1, 0, 0, 0, 7}, {"1g.10gb+me", 1, 1, 1, 1, 1, 1}, {"1g.20gb", 2, 1, 1, 0, 0, 4}, {"2g.20gb", 2, 2, 1, 0, 0, 3}, {"3g.40gb", 4, 3, 2, 0, 0, 2}, {"4g.40gb", 4, 4, 2, 0, 0, 1}, {"7g.80gb", 8, 7, 5, 1, 1, 1}},
	"h100-80gb":  {{"1g.10gb", 1, 1, 1, 1, 0, 7}, {"1g.10gb+me", 1, 1, 1, 1, 1, 1}, {"1g.20gb", 2, 1, 1, 1, 0, 4}, {"2g.20gb", 2, 2, 2, 2, 0, 3}, {"3g.40gb", 4, 3, 3, 3, 0, 2}, {"4g.40gb", 4, 4, 4, 4, 0, 1}, {"7g.80gb", 8, 8, 7, 7, 1, 1}},
	"h100-94gb":  {{"1g.12gb", 1, 1, 1, 1, 0, 7}, {"1g.12gb+me", 1, 1, 1, 1, 1, 1}, {"1g.24gb", 2, 1, 1, 1, 0, 4}, {"2g.24gb", 2, 2, 2, 2, 0, 3}, {"3g.47gb", 4, 3, 3, 3, 0, 2}, {"4g.47gb", 4, 4, 4, 4, 0, 1}, {"7g.94gb", 8, 8, 7, 7, 1, 1}},
	"h100-96gb":  {{"1g.12gb", 1, 1, 1, 1, 0, 7}, {"1g.12gb+me", 1, 1, 1, 1, 1, 1}, {"1g.24gb", 2, 1, 1, 1, 0, 4}, {"2g.24gb", 2, 2, 2, 2, 0, 3}, {"3g.48gb", 4, 3, 3, 3, 0, 2}, {"4g.48gb", 4, 4, 4, 4, 0, 1}, {"7g.96gb", 8, 8, 7, 7, 1, 1}},
	"h200-141gb": {{"1g.18gb", 1, 1, 1, 1, 0, 7}, {"1g.18gb+me", 1, 1, 1, 1, 1, 1}, {"1g.35gb", 2, 1, 1, 1, 0, 4}, {"2g.35gb", 2, 2, 2, 2, 0, 3}, {"3g.71gb", 4, 3, 3, 3, 0, 2}, {"4g.71gb", 4, 4, 4, 4, 0, 1}, {"7g.141gb", 8, 8, 7, 7, 1, 1}},
	"b200-180gb": {{"1g.23gb", 1, 2, 1, 1, 0, 7}, {"1g.23gb+me", 1, 2, 1, 1, 1, 1}, {"1g.45gb", 2, 2, 1, 1, 0, 4}, {"2g.45gb", 2, 3, 1, 1, 0, 3}, {"3g.90gb", 4, 6, 1, 1, 0, 2}, {"4g.90gb", 4, 8, 1, 1, 0, 1}, {"7g.180gb", 8, 16, 1, 1, 1, 1}},
}

func TestMIGTablesMatchNVIDIAGuide(t *testing.T) {
	require.Len(t, MIGProducts(), len(guide))
	for _, p := range MIGProducts() {
		rows, ok := guide[p.Name]
		require.True(t, ok, p.Name)
		require.Len(t, p.Profiles, len(rows), p.Name)
		assert.Contains(t, p.Source, "mig-user-guide")
		for i, r := range rows {
			pf := p.Profiles[i]
			got := guideRow{pf.Name, pf.MemorySlices, pf.CopyEngines, pf.Decoders, pf.JPEGs, pf.OFAs, pf.MaxInstances}
			assert.Equal(t, r, got, "%s %s", p.Name, r.name)
			c, gb := parseProfileName(pf.Name)
			assert.Equal(t, c, pf.ComputeSlices)
			assert.Equal(t, gb, pf.MemoryGB)
			// Memory in the name is about the memory slices' share of the
			// product (the names round down to whole GB).
			share := float64(p.MemoryGB) * float64(pf.MemorySlices) / float64(p.MemorySlices)
			assert.InDelta(t, share, float64(pf.MemoryGB), 0.13*share+1, "%s %s", p.Name, pf.Name)
		}
	}
}

// The placements give exactly the guide's instance counts: the most
// instances of a profile that fit side by side equals "Number of Instances
// Available" (the +me profiles are capped at one by the guide's footnote).
func TestMIGPlacementsGiveGuideInstanceCounts(t *testing.T) {
	for _, p := range MIGProducts() {
		for pi := range p.Profiles {
			pf := &p.Profiles[pi]
			count := make([]int, len(p.Profiles))
			var used uint32
			for _, s := range pf.Starts {
				if used&pf.Mask(s) == 0 {
					used |= pf.Mask(s)
					count[pi]++
				}
			}
			if pf.Media() {
				assert.Equal(t, 1, pf.MaxInstances, "%s %s", p.Name, pf.Name)
				continue
			}
			assert.Equal(t, pf.MaxInstances, count[pi], "%s %s", p.Name, pf.Name)
			for _, s := range pf.Starts {
				assert.LessOrEqual(t, s+pf.MemorySlices, p.MemorySlices, "%s %s at %d", p.Name, pf.Name, s)
			}
		}
	}
}

// The examples of the guide's "Getting Started with MIG" on an A100 40 GB,
// and layouts the placement figure forbids.
func TestMIGCheckA100(t *testing.T) {
	p, err := LookupMIGProduct("a100-40gb")
	require.NoError(t, err)
	in := func(s ...any) []MIGInstance {
		var out []MIGInstance
		for i := 0; i < len(s); i += 2 {
			out = append(out, MIGInstance{s[i].(string), s[i+1].(int)})
		}
		return out
	}
	for _, ok := range [][]MIGInstance{
		in("3g.20gb", 4, "3g.20gb", 0),                                                        // two 3g.20gb: 4:4 and 0:4
		in("1g.5gb", 0, "1g.5gb", 1, "2g.10gb", 2, "3g.20gb", 4),                              // the 3-2-1-1 geometry
		in("2g.10gb", 4, "1g.5gb", 0, "1g.5gb", 1, "1g.5gb", 2, "1g.5gb", 3, "1g.5gb", 6),     // the 2-1-1-1-1-1 geometry
		in("4g.20gb", 0, "3g.20gb", 4),                                                        // allowed since R510
		in("1g.10gb", 6, "1g.5gb", 0, "1g.5gb", 1, "1g.5gb", 2, "1g.5gb+me", 3, "2g.10gb", 4), // 7 compute slices
		in("7g.40gb", 0),
		nil,
	} {
		used, count, err := p.Check(ok)
		require.NoError(t, err, "%v", ok)
		assert.LessOrEqual(t, p.ComputeSlices-p.Free(count), 7)
		mem := 0
		for _, i := range ok {
			pi, _ := p.Profile(i.Profile)
			mem += p.Profiles[pi].MemorySlices
		}
		assert.Equal(t, mem, len(maskSlices(used)))
	}
	for _, c := range []struct {
		layout []MIGInstance
		kind   error
		msg    string
	}{
		{in("4g.20gb", 4), ErrInvalidPlacement, "may start at memory slice {0}"},
		{in("1g.5gb", 7), ErrInvalidPlacement, "{0,1,2,3,4,5,6}"},
		{in("3g.20gb", 0, "4g.20gb", 0), ErrInvalidPlacement, "overlaps"},
		{in("1g.5gb+me", 0, "1g.5gb+me", 1), ErrInvalidPlacement, "at most 1"},
		{in("3g.40gb", 0), ErrUnknownProfile, `no MIG profile "3g.40gb"`},
		{in("2g.10gb", 1), ErrInvalidPlacement, "{0,2,4}"},
	} {
		_, _, err := p.Check(c.layout)
		require.ErrorIs(t, err, c.kind, "%v", c.layout)
		assert.ErrorContains(t, err, c.msg)
	}
}

// Every valid A100 layout is found by brute force over all placements;
// the largest has 7 instances and none uses more than 7 compute slices.
func TestMIGEnumerateA100(t *testing.T) {
	p, _ := LookupMIGProduct("a100-40gb")
	var n, maxLen int
	var rec func(layout []MIGInstance, from int)
	rec = func(layout []MIGInstance, from int) {
		n++
		maxLen = max(maxLen, len(layout))
		for s := from; s < p.MemorySlices; s++ {
			for _, pf := range p.Profiles {
				next := append(append([]MIGInstance(nil), layout...), MIGInstance{pf.Name, s})
				if _, _, err := p.Check(next); err == nil {
					rec(next, s+pf.MemorySlices)
				}
			}
		}
	}
	rec(nil, 0)
	assert.Equal(t, 7, maxLen)
	t.Logf("%d valid layouts of an A100 40 GB (the empty one included)", n)
	assert.Greater(t, n, 100)
}

func TestMIGStranded(t *testing.T) {
	p, _ := LookupMIGProduct("h100-80gb")
	for _, c := range []struct {
		layout []MIGInstance
		want   int
	}{
		{nil, 0},
		// 3g.40gb at 0: four compute slices free, but only a 3g fits (at 4).
		{[]MIGInstance{{"3g.40gb", 0}}, 1},
		// 3g.40gb at 4: a 4g.40gb still fits at 0.
		{[]MIGInstance{{"3g.40gb", 4}}, 0},
		// 1g.10gb at 0 and 4: 5 free, largest usable 2g (at 2) -> 3 stranded.
		{[]MIGInstance{{"1g.10gb", 0}, {"1g.10gb", 4}}, 3},
		{[]MIGInstance{{"7g.80gb", 0}}, 0},
	} {
		used, count, err := p.Check(c.layout)
		require.NoError(t, err)
		assert.Equal(t, c.want, p.Stranded(used, count), "%v", c.layout)
	}
}

func TestMIGProductFor(t *testing.T) {
	for _, c := range []struct {
		t    GPUType
		mib  int
		want string
	}{
		{A100, 40960, "a100-40gb"}, {A100, 40536, "a100-40gb"}, {A100, 81920, "a100-80gb"},
		{H100, 81559, "h100-80gb"}, {H100, 95830, "h100-94gb"}, {"gh200-480gb", 97871, "h100-96gb"},
		{H200, 143771, "h200-141gb"}, {B200, 183359, "b200-180gb"}, {"a30", 24576, "a30-24gb"},
	} {
		p, err := MIGProductFor(c.t, c.mib)
		require.NoError(t, err, "%s %d", c.t, c.mib)
		assert.Equal(t, c.want, p.Name)
	}
	_, err := MIGProductFor(V100, 16384)
	require.ErrorIs(t, err, ErrNoMIG)
	assert.ErrorContains(t, err, "GPU type v100 has no MIG")
	_, err = MIGProductFor(A100, 16384)
	require.ErrorIs(t, err, ErrNoMIG)
	_, err = LookupMIGProduct("a100-16gb")
	require.ErrorIs(t, err, ErrUnknownProfile)
}

const migSpec = `{"servers": [
  {"id": "a", "gpu_type": "a100", "gpus": 2, "memory_mib": 81920,
   "mig": {"instances": [{"profile": "3g.40gb", "start": 4}, {"profile": "2g.20gb", "start": 0}]}},
  {"id": "h", "devices": [
     {"type": "h100", "mig": {"product": "h100-80gb", "instances": [{"profile": "7g.80gb", "start": 0}]}},
     {"type": "h100"}]}
]}`

func TestMIGSpec(t *testing.T) {
	c, err := ParseJSON([]byte(migSpec))
	require.NoError(t, err)
	g := c.Servers[0].GPUs[1]
	require.NotNil(t, g.MIG)
	assert.Equal(t, []MIGInstance{{"3g.40gb", 4}, {"2g.20gb", 0}}, g.MIG.Instances)
	p, err := g.MIGProduct()
	require.NoError(t, err)
	assert.Equal(t, "a100-80gb", p.Name)
	assert.Nil(t, c.Servers[1].GPUs[1].MIG)
	out, err := json.Marshal(c.Spec())
	require.NoError(t, err)
	back, err := ParseJSON(out)
	require.NoError(t, err)
	assert.Equal(t, c.Servers, back.Servers)
}

func TestMIGSpecErrors(t *testing.T) {
	for _, c := range []struct {
		spec string
		kind error
		msg  string
	}{
		{`{"servers": [{"gpu_type": "v100", "gpus": 1, "mig": {"instances": []}}]}`, ErrNoMIG, "GPU type v100 has no MIG"},
		{`{"servers": [{"gpu_type": "a100", "gpus": 1, "mig": {"instances": [{"profile": "3g.40gb", "start": 0}]}}]}`, ErrUnknownProfile, `a100-40gb has no MIG profile "3g.40gb"`},
		{`{"servers": [{"gpu_type": "h100", "gpus": 1, "mig": {"instances": [{"profile": "4g.40gb", "start": 4}]}}]}`, ErrInvalidPlacement, `gpus[0]: mig.instances[0]`},
		{`{"servers": [{"gpu_type": "h100", "gpus": 1, "mig": {"product": "a100-80gb", "instances": []}}]}`, ErrInvalidPlacement, "product a100-80gb is a a100, but the GPU is a h100"},
		{`{"servers": [{"gpu_type": "h100", "gpus": 1, "mig": {"product": "h900", "instances": []}}]}`, ErrUnknownProfile, `no MIG product "h900"`},
		{`{"servers": [{"devices": [{"type": "h100"}], "mig": {"instances": []}}]}`, ErrMalformedSpec, "mig applies to gpu_type"},
	} {
		_, err := ParseJSON([]byte(c.spec))
		require.ErrorIs(t, err, c.kind, c.spec)
		assert.ErrorContains(t, err, c.msg)
	}
}

func TestMIGSliceAndFractionTypes(t *testing.T) {
	for _, p := range MIGProducts() {
		for pi, pf := range p.Profiles {
			st := MIGSliceType(p, pf.Name)
			require.NoError(t, st.Validate(), st)
			q, qi, ok := ParseMIGSliceType(st)
			require.True(t, ok, st)
			assert.Equal(t, p, q)
			assert.Equal(t, pi, qi)
		}
	}
	p, _ := LookupMIGProduct("a100-40gb")
	assert.Equal(t, GPUType("a100-40gb-1g.5gb_me"), MIGSliceType(p, "1g.5gb+me"))
	_, _, ok := ParseMIGSliceType("a100-40gb-9g.5gb")
	assert.False(t, ok)
	_, _, ok = ParseMIGSliceType(A100)
	assert.False(t, ok)

	ft, err := FractionType(A100, 0.25)
	require.NoError(t, err)
	assert.Equal(t, GPUType("a100-frac0.25"), ft)
	base, f, ok := ParseFractionType(ft)
	assert.True(t, ok)
	assert.Equal(t, A100, base)
	assert.Equal(t, 0.25, f)
	for _, bad := range []float64{0, -0.5, 1.5} {
		_, err := FractionType(A100, bad)
		require.ErrorIs(t, err, ErrInvalidCount)
	}
	for _, s := range []GPUType{"a100", "a100-frac", "a100-frac0", "a100-frac2", "-frac0.5", "a100-fracx"} {
		_, _, ok := ParseFractionType(s)
		assert.False(t, ok, s)
	}
}

// FuzzMIGCheck feeds arbitrary layouts to Check: it never panics, and an
// accepted layout keeps every rule.
func FuzzMIGCheck(f *testing.F) {
	f.Add("a100-40gb", "3g.20gb", 4, "2g.10gb", 0, "1g.5gb", 2)
	f.Add("h100-80gb", "7g.80gb", 0, "", 0, "", 0)
	f.Add("a30-24gb", "2g.12gb", 2, "1g.6gb+me", 0, "1g.6gb", 1)
	f.Fuzz(func(t *testing.T, product, p1 string, s1 int, p2 string, s2 int, p3 string, s3 int) {
		p, err := LookupMIGProduct(product)
		if err != nil {
			require.ErrorIs(t, err, ErrUnknownProfile)
			return
		}
		layout := []MIGInstance{{p1, s1}, {p2, s2}, {p3, s3}}
		used, count, err := p.Check(layout)
		if err != nil {
			if !errors.Is(err, ErrUnknownProfile) && !errors.Is(err, ErrInvalidPlacement) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		slicesUsed, compute := 0, 0
		for _, in := range layout {
			pi, _ := p.Profile(in.Profile)
			slicesUsed += p.Profiles[pi].MemorySlices
			compute += p.Profiles[pi].ComputeSlices
		}
		require.Equal(t, slicesUsed, len(maskSlices(used)), "instances overlap")
		require.LessOrEqual(t, compute, p.ComputeSlices)
		require.GreaterOrEqual(t, p.Stranded(used, count), 0)
	})
}

func ExampleMIGProduct_Check() {
	p, _ := LookupMIGProduct("h100-80gb")
	_, _, err := p.Check([]MIGInstance{{Profile: "3g.40gb", Start: 4}, {Profile: "4g.40gb", Start: 0}})
	fmt.Println(err)
	_, _, err = p.Check([]MIGInstance{{Profile: "4g.40gb", Start: 4}})
	fmt.Println(errors.Is(err, ErrInvalidPlacement), strings.Contains(err.Error(), "{0}"))
	// Output:
	// <nil>
	// true true
}
