package topology

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCompactGavelCluster(t *testing.T) {
	for _, spec := range []string{"v100:36,p100:36,k80:36", "36:36:36", " V100:36 , P100:36,k80:36 "} {
		c, err := ParseCompact(spec, 4)
		require.NoError(t, err, spec)
		assert.Equal(t, map[GPUType]int{V100: 36, P100: 36, K80: 36}, c.Capacity(), spec)
		assert.Equal(t, 108, c.NumGPUs())
		assert.Len(t, c.Servers, 27)
		assert.Equal(t, []GPUType{K80, P100, V100}, c.GPUTypes())
	}
	c, err := ParseCompact("v100:32:8,k80:8", 2)
	require.NoError(t, err)
	assert.Len(t, c.Servers, 4+4)
	assert.Equal(t, "v100-3", c.Servers[3].ID)
	assert.Len(t, c.Servers[0].GPUs, 8)
	assert.Len(t, c.Servers[4].GPUs, 2)
	// Two K80 GPUs on one board.
	assert.Equal(t, Link{Class: LinkSameBoard}, c.Servers[4].Link(0, 1))

	c, err = ParseCompact("0:4:0", 1)
	require.NoError(t, err)
	assert.Equal(t, map[GPUType]int{P100: 4}, c.Capacity())
}

func TestParseCompactErrors(t *testing.T) {
	tests := []struct {
		spec    string
		perSrv  int
		kind    error
		message string
	}{
		{"", 1, ErrMalformedSpec, "empty cluster spec"},
		{"v100", 1, ErrMalformedSpec, "want type:count"},
		{"v100:-4", 1, ErrInvalidCount, "-4 GPUs"},
		{"v100:0", 1, ErrInvalidCount, "0 GPUs"},
		{"v100:x", 1, ErrMalformedSpec, `count "x" is not an integer`},
		{"v100:36", 0, ErrInvalidCount, "0 GPUs per server"},
		{"v100:36", -2, ErrInvalidCount, "-2 GPUs per server"},
		{"v100:36:8", 1, ErrInvalidCount, "36 GPUs do not fill servers of 8"},
		{"v100:8,v100:8", 1, ErrDuplicateID, "appears twice"},
		{"v 100:8", 1, ErrInvalidGPUType, "not allowed"},
		{"1:2:3:4", 1, ErrMalformedSpec, "at most 3 counts"},
		{"0:0:0", 1, ErrInvalidCount, "at least one server"},
		{"1:-1", 1, ErrInvalidCount, "-1 GPUs"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := ParseCompact(tc.spec, tc.perSrv)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.message)
		})
	}
}

func TestHomogeneousInterconnects(t *testing.T) {
	c, err := Homogeneous(2, ServerTemplate{Type: V100, GPUs: 8, Interconnect: HybridCubeMesh, NICGbps: 100})
	require.NoError(t, err)
	s := &c.Servers[1]
	assert.Equal(t, "v100-1", s.ID)
	// Every V100 of a DGX-1 uses all six of its NVLinks.
	for i := range 8 {
		links := 0
		for j := range 8 {
			if l := s.Link(i, j); l.Class == LinkNVLink {
				links += l.NVLinks
			}
		}
		assert.Equal(t, 6, links, "GPU %d", i)
	}
	assert.Equal(t, "NV2", s.Link(0, 3).String())
	assert.Equal(t, "SYS", s.Link(0, 5).String())
	assert.Equal(t, 50.0, s.PairBandwidth(0, 3))
	assert.Equal(t, pcie3/2, s.PairBandwidth(0, 5))
	assert.Equal(t, 0, s.GPUs[3].NUMANode)
	assert.Equal(t, 1, s.GPUs[4].NUMANode)
	assert.Equal(t, 12.5, s.NICGBps())
	assert.Equal(t, 16<<10, s.GPUs[0].MemoryMiB)

	c, err = Homogeneous(1, ServerTemplate{Type: H100, GPUs: 8, Interconnect: NVSwitch})
	require.NoError(t, err)
	assert.Equal(t, Link{Class: LinkNVSwitch, NVLinks: 18}, c.Servers[0].Link(2, 7))
	assert.Equal(t, 450.0, c.Servers[0].PairBandwidth(2, 7))

	c, err = Homogeneous(1, ServerTemplate{Type: "mi300x", GPUs: 2, Interconnect: "nvlink:4", MemoryMiB: 192 << 10})
	require.NoError(t, err)
	assert.Equal(t, "NV4", c.Servers[0].Link(0, 1).String())
	assert.Equal(t, 100.0, c.Servers[0].PairBandwidth(1, 0))
	assert.Equal(t, Link{Class: LinkSelf}, c.Servers[0].Link(1, 1))

	c, err = Homogeneous(1, ServerTemplate{Type: T4, GPUs: 4, Interconnect: PCIeDualSocket})
	require.NoError(t, err)
	assert.Equal(t, LinkSingleSwitch, c.Servers[0].Link(0, 1).Class)
	assert.Equal(t, LinkCrossSocket, c.Servers[0].Link(1, 2).Class)

	c, err = Homogeneous(3, ServerTemplate{Type: A100, GPUs: 1})
	require.NoError(t, err)
	assert.Nil(t, c.Servers[0].Links)
	assert.Equal(t, LinkSelf, c.Servers[0].Link(0, 0).Class)
}

func TestHomogeneousErrors(t *testing.T) {
	tests := []struct {
		name string
		n    int
		tmpl ServerTemplate
		kind error
		msg  string
	}{
		{"no servers", 0, ServerTemplate{Type: V100, GPUs: 4}, ErrInvalidCount, "0 servers"},
		{"negative GPUs", 2, ServerTemplate{Type: V100, GPUs: -1}, ErrInvalidCount, "-1 GPUs per v100 server"},
		{"empty type", 2, ServerTemplate{GPUs: 1}, ErrInvalidGPUType, "empty GPU type"},
		{"upper-case type", 2, ServerTemplate{Type: "V100", GPUs: 1}, ErrInvalidGPUType, `character 'V'`},
		{"cube mesh of 4", 1, ServerTemplate{Type: V100, GPUs: 4, Interconnect: HybridCubeMesh}, ErrInvalidCount, "needs 8 GPUs"},
		{"bad interconnect", 1, ServerTemplate{Type: V100, GPUs: 4, Interconnect: "infiniband"}, ErrUnknownLinkClass, `unknown interconnect "infiniband"`},
		{"nvlink:0", 1, ServerTemplate{Type: V100, GPUs: 4, Interconnect: "nvlink:0"}, ErrUnknownLinkClass, "unknown interconnect"},
		{"negative memory", 1, ServerTemplate{Type: V100, GPUs: 4, MemoryMiB: -5}, ErrInvalidCount, "-5 MiB"},
		{"NaN NIC", 1, ServerTemplate{Type: V100, GPUs: 4, NICGbps: math.NaN()}, ErrInvalidCount, "NIC bandwidth NaN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Homogeneous(tc.n, tc.tmpl)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func validServer(id string) Server {
	return Server{
		ID: id,
		GPUs: []GPU{
			{Index: 0, Type: V100, MemoryMiB: 16384, UUID: id + "-a"},
			{Index: 1, Type: V100, MemoryMiB: 16384, UUID: id + "-b"},
		},
		Links: [][]Link{
			{{Class: LinkSelf}, {Class: LinkNVLink, NVLinks: 2}},
			{{Class: LinkNVLink, NVLinks: 2}, {Class: LinkSelf}},
		},
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(c *Cluster)
		kind   error
		msg    string
	}{
		{"no servers", func(c *Cluster) { c.Servers = nil }, ErrInvalidCount, "at least one server"},
		{"duplicate server id", func(c *Cluster) { c.Servers[1].ID = "a" }, ErrDuplicateID, `server id "a" is also the id of servers[0]`},
		{"empty id", func(c *Cluster) { c.Servers[1].ID = "" }, ErrMalformedSpec, "no id"},
		{"no GPUs", func(c *Cluster) { c.Servers[0].GPUs, c.Servers[0].Links = nil, nil }, ErrInvalidCount, "no GPUs"},
		{"duplicate GPU index", func(c *Cluster) { c.Servers[0].GPUs[1].Index = 0 }, ErrDuplicateID, "GPU index 0"},
		{"negative GPU index", func(c *Cluster) { c.Servers[0].GPUs[1].Index = -3 }, ErrInvalidCount, "GPU index -3 is negative"},
		{"duplicate UUID", func(c *Cluster) { c.Servers[1].GPUs[0].UUID = "a-a" }, ErrDuplicateID, `UUID "a-a"`},
		{"zero memory", func(c *Cluster) { c.Servers[0].GPUs[0].MemoryMiB = 0 }, ErrInvalidCount, "GPU memory 0 MiB"},
		{"bad NUMA", func(c *Cluster) { c.Servers[0].GPUs[0].NUMANode = -2 }, ErrInvalidCount, "NUMA node -2"},
		{"bad type", func(c *Cluster) { c.Servers[0].GPUs[0].Type = "" }, ErrInvalidGPUType, "empty GPU type"},
		{"negative NIC", func(c *Cluster) { c.Servers[0].NICGbps = -1 }, ErrInvalidCount, "NIC bandwidth -1"},
		{"asymmetric", func(c *Cluster) {
			c.Servers[0].Links = [][]Link{{{Class: LinkSelf}, {Class: LinkSingleSwitch}}, {{Class: LinkCrossSocket}, {Class: LinkSelf}}}
		}, ErrAsymmetricLinks, "links[0][1]=PIX but links[1][0]=SYS"},
		{"asymmetric NVLink count", func(c *Cluster) { c.Servers[0].Links[1][0].NVLinks = 1 }, ErrAsymmetricLinks, "links[0][1]=NV2 but links[1][0]=NV1"},
		{"unknown class", func(c *Cluster) {
			c.Servers[0].Links = [][]Link{{{Class: LinkSelf}, {Class: 42}}, {{Class: 42}, {Class: LinkSelf}}}
		}, ErrUnknownLinkClass, "link class value 42"},
		{"unset class", func(c *Cluster) {
			c.Servers[0].Links = [][]Link{{{Class: LinkSelf}, {}}, {{}, {Class: LinkSelf}}}
		}, ErrUnknownLinkClass, "not set"},
		{"self off diagonal", func(c *Cluster) {
			c.Servers[0].Links = [][]Link{{{Class: LinkSelf}, {Class: LinkSelf}}, {{Class: LinkSelf}, {Class: LinkSelf}}}
		}, ErrUnknownLinkClass, "only on the diagonal"},
		{"bad diagonal", func(c *Cluster) { c.Servers[0].Links[0][0] = Link{Class: LinkSingleSwitch} }, ErrUnknownLinkClass, "diagonal must be X"},
		{"NVLink without links", func(c *Cluster) {
			c.Servers[0].Links[0][1].NVLinks, c.Servers[0].Links[1][0].NVLinks = 0, 0
		}, ErrInvalidCount, "NVLink link with 0 links"},
		{"PIX with NVLinks", func(c *Cluster) {
			c.Servers[0].Links[0][1], c.Servers[0].Links[1][0] = Link{Class: LinkSingleSwitch, NVLinks: 2}, Link{Class: LinkSingleSwitch, NVLinks: 2}
		}, ErrInvalidCount, "only NV and NVS links count NVLinks"},
		{"links not square", func(c *Cluster) { c.Servers[0].Links = c.Servers[0].Links[:1] }, ErrMalformedSpec, "link matrix is not 2x2"},
		{"bandwidth not square", func(c *Cluster) { c.Servers[0].Bandwidth = [][]float64{{0, 1}, {1}} }, ErrMalformedSpec, "bandwidth matrix is not 2x2"},
		{"bandwidth asymmetric", func(c *Cluster) { c.Servers[0].Bandwidth = [][]float64{{0, 10}, {12, 0}} }, ErrAsymmetricLinks, "bandwidth[0][1]=10 but bandwidth[1][0]=12"},
		{"bandwidth zero", func(c *Cluster) { c.Servers[0].Bandwidth = [][]float64{{0, 0}, {0, 0}} }, ErrInvalidCount, "bandwidth 0 GB/s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{Servers: []Server{validServer("a"), validServer("b")}}
			require.NoError(t, c.Validate())
			tc.modify(c)
			err := c.Validate()
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.msg)
			var se *SpecError
			require.ErrorAs(t, err, &se)
		})
	}
}

func TestValidateReportsManyProblems(t *testing.T) {
	c := &Cluster{}
	for range 30 {
		s := validServer("same")
		c.Servers = append(c.Servers, s)
	}
	err := c.Validate()
	require.Error(t, err)
	// 29 duplicate server ids and 58 duplicate UUIDs, reported up to twenty.
	assert.Equal(t, 20+1, strings.Count(err.Error(), "topology: "))
	assert.NotContains(t, err.Error(), "\n")
	var many interface{ Unwrap() []error }
	require.ErrorAs(t, err, &many)
	assert.Len(t, many.Unwrap(), 20+1)
	assert.Contains(t, err.Error(), "and 67 more problems")
}

func TestParseLink(t *testing.T) {
	good := map[string]Link{
		"X": {Class: LinkSelf}, "sys": {Class: LinkCrossSocket}, "SOC": {Class: LinkCrossSocket},
		"NODE": {Class: LinkSameNUMA}, "PHB": {Class: LinkHostBridge}, "PXB": {Class: LinkMultiSwitch},
		"PIX": {Class: LinkSingleSwitch}, "SB": {Class: LinkSameBoard}, "NV1": {Class: LinkNVLink, NVLinks: 1},
		" nv12 ": {Class: LinkNVLink, NVLinks: 12}, "NVS": {Class: LinkNVSwitch}, "NVS18": {Class: LinkNVSwitch, NVLinks: 18},
	}
	for s, want := range good {
		got, err := ParseLink(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
		again, err := ParseLink(got.String())
		require.NoError(t, err)
		assert.Equal(t, got, again)
	}
	for _, s := range []string{"", "NV", "NV0", "NV-1", "NV+2", "NV65", "NV01", "NVLINK", "PCIE", "NVSx"} {
		_, err := ParseLink(s)
		assert.ErrorIs(t, err, ErrUnknownLinkClass, s)
	}
	assert.Equal(t, "LinkClass(99)", LinkClass(99).String())
}

func TestLinkOrderMatchesGoGPUAllocator(t *testing.T) {
	// Farthest to closest, as go-gpuallocator scores them (10, 20, ..., 100 per NVLink).
	order := []LinkClass{LinkCrossSocket, LinkSameNUMA, LinkHostBridge, LinkMultiSwitch, LinkSingleSwitch, LinkSameBoard, LinkNVLink, LinkNVSwitch}
	for i := 1; i < len(order); i++ {
		assert.Less(t, order[i-1], order[i])
	}
}

func TestNominalBandwidth(t *testing.T) {
	assert.Equal(t, 150.0, Link{Class: LinkNVLink, NVLinks: 6}.NominalBandwidth(V100, V100))
	assert.Equal(t, 40.0, Link{Class: LinkNVLink, NVLinks: 2}.NominalBandwidth(P100, V100), "slower side counts")
	assert.Equal(t, 300.0, Link{Class: LinkNVSwitch}.NominalBandwidth(A100, A100))
	assert.Equal(t, 900.0, Link{Class: LinkNVSwitch}.NominalBandwidth(B200, B200))
	assert.Equal(t, pcie4, Link{Class: LinkSingleSwitch}.NominalBandwidth(A100, A100))
	assert.Equal(t, pcie3, Link{Class: LinkHostBridge}.NominalBandwidth(A100, T4))
	assert.Equal(t, pcie5/2, Link{Class: LinkCrossSocket}.NominalBandwidth(H100, H200))
	assert.Equal(t, 0.0, Link{Class: LinkSelf}.NominalBandwidth(H100, H100))

	s := validServer("m")
	s.Bandwidth = [][]float64{{0, 42}, {42, 0}}
	assert.Equal(t, 42.0, s.PairBandwidth(0, 1))
	assert.Equal(t, 0.0, s.PairBandwidth(1, 1))
}

func TestGPUTypes(t *testing.T) {
	for _, in := range []string{"V100", " v100", "v100"} {
		got, err := ParseGPUType(in)
		require.NoError(t, err)
		assert.Equal(t, V100, got)
	}
	got, err := ParseGPUType("MI300X")
	require.NoError(t, err)
	assert.Equal(t, GPUType("mi300x"), got)
	assert.False(t, got.Known())
	_, ok := got.Info()
	assert.False(t, ok)
	info, ok := H200.Info()
	require.True(t, ok)
	assert.Equal(t, 141<<10, info.MemoryMiB)
	for _, bad := range []string{"", "  ", "v100 sxm", "a/b", strings.Repeat("x", 65)} {
		_, err := ParseGPUType(bad)
		assert.ErrorIs(t, err, ErrInvalidGPUType, bad)
	}
	known := KnownGPUTypes()
	assert.Contains(t, known, K80)
	assert.Contains(t, known, H200)
	assert.IsNonDecreasing(t, known)
}

func TestSpecErrorFormat(t *testing.T) {
	err := specErr(ErrDuplicateID, "servers[1]", "id %q", "x")
	assert.Equal(t, `topology: servers[1]: duplicate id: id "x"`, err.Error())
	assert.Equal(t, "topology: invalid count: n", specErr(ErrInvalidCount, "", "n").Error())
	assert.True(t, errors.Is(err, ErrDuplicateID))
}

func TestBuildersRefuseHugeClusters(t *testing.T) {
	_, err := ParseCompact("v100:4000000", 4)
	assert.ErrorIs(t, err, ErrInvalidCount)
	assert.Contains(t, err.Error(), "more than 1048576 GPUs")
	_, err = Homogeneous(1, ServerTemplate{Type: V100, GPUs: 2000})
	assert.ErrorIs(t, err, ErrInvalidCount)
	_, err = Homogeneous(math.MaxInt, ServerTemplate{Type: V100, GPUs: 8})
	assert.ErrorIs(t, err, ErrInvalidCount)
}
