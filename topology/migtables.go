package topology

import (
	"slices"
	"strconv"
	"strings"
)

// migGuide cites the tables.
const migGuide = "NVIDIA Multi-Instance GPU User Guide, Supported MIG Profiles " +
	"(docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html), "

// NVML GPU instance profile indices (nvml.h, NVML_GPU_INSTANCE_PROFILE_*).
const (
	nvml1Slice     = 0
	nvml2Slice     = 1
	nvml3Slice     = 2
	nvml4Slice     = 3
	nvml7Slice     = 4
	nvml1SliceRev1 = 7 // one slice with media extensions
	nvml2SliceRev1 = 8 // two slices with media extensions (A30)
	nvml1SliceRev2 = 9 // one compute slice, two memory slices
)

// shape is the placement shape of a row of the guide's tables.
type shape struct {
	memSlices, max, nvml int
	starts               []int
}

// The rows of an eight-memory-slice product in the guide's order: 1g,
// 1g+me, 1g with two memory slices, 2g, 3g, 4g, 7g.
var eightSlices = [7]shape{
	{1, 7, nvml1Slice, []int{0, 1, 2, 3, 4, 5, 6}},
	{1, 1, nvml1SliceRev1, []int{0, 1, 2, 3, 4, 5, 6}},
	{2, 4, nvml1SliceRev2, []int{0, 2, 4, 6}},
	{2, 3, nvml2Slice, []int{0, 2, 4}},
	{4, 2, nvml3Slice, []int{0, 4}},
	{4, 1, nvml4Slice, []int{0}},
	{8, 1, nvml7Slice, []int{0}},
}

// The rows of the A30: 1g, 1g+me, 2g, 2g+me, 4g.
var fourSlices = [5]shape{
	{1, 4, nvml1Slice, []int{0, 1, 2, 3}},
	{1, 1, nvml1SliceRev1, []int{0, 1, 2, 3}},
	{2, 2, nvml2Slice, []int{0, 2}},
	{2, 1, nvml2SliceRev1, []int{0, 2}},
	{4, 1, nvml4Slice, []int{0}},
}

// units are the copy engines, NVDECs, NVJPGs and OFAs of one row.
type units struct{ ce, dec, jpeg, ofa int }

// hopper are the units of the H100 and H200 tables (identical in the guide).
var hopper = [7]units{{1, 1, 1, 0}, {1, 1, 1, 1}, {1, 1, 1, 0}, {2, 2, 2, 0}, {3, 3, 3, 0}, {4, 4, 4, 0}, {8, 7, 7, 1}}

// ampere are the units of the A100 table (40 GB; the 80 GB product differs
// only in its names).
var ampere = [7]units{{1, 0, 0, 0}, {1, 1, 1, 1}, {1, 1, 0, 0}, {2, 1, 0, 0}, {3, 2, 0, 0}, {4, 2, 0, 0}, {7, 5, 1, 1}}

var migProducts = buildProducts()

func buildProducts() []*MIGProduct {
	ps := []*MIGProduct{
		product("a30-24gb", "a30", 24, 4, fourSlices[:], []string{"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"},
			[]units{{1, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 0, 0}, {2, 2, 1, 1}, {4, 4, 1, 1}}, "A30 MIG Profiles (A30-24GB)"),
		product("a100-40gb", A100, 40, 7, eightSlices[:], []string{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
			ampere[:], "A100 MIG Profiles (A100-SXM4-40GB)"),
		product("a100-80gb", A100, 80, 7, eightSlices[:], []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
			ampere[:], "A100 MIG Profiles (A100-SXM4-80GB: the 40 GB table with the names changed by memory proportion)"),
		product("h100-80gb", H100, 80, 7, eightSlices[:], []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
			hopper[:], "H100 MIG Profiles (H100 80GB, PCIe and SXM5)"),
		product("h100-94gb", H100, 94, 7, eightSlices[:], []string{"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"},
			hopper[:], "H100 MIG Profiles (H100 94GB, PCIe and SXM5)"),
		product("h100-96gb", "gh200", 96, 7, eightSlices[:], []string{"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"},
			hopper[:], "H100 MIG Profiles (H100 96GB, H100 on GH200)"),
		product("h200-141gb", H200, 141, 7, eightSlices[:], []string{"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
			hopper[:], "H200 MIG Profiles (H200 141GB)"),
		product("b200-180gb", B200, 180, 7, eightSlices[:], []string{"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"},
			[]units{{2, 1, 1, 0}, {2, 1, 1, 1}, {2, 1, 1, 0}, {3, 1, 1, 0}, {6, 1, 1, 0}, {8, 1, 1, 0}, {16, 1, 1, 1}}, "B200 MIG Profiles (B200 180GB)"),
	}
	slices.SortFunc(ps, func(a, b *MIGProduct) int { return strings.Compare(a.Name, b.Name) })
	return ps
}

func product(name string, t GPUType, gb, compute int, rows []shape, names []string, u []units, table string) *MIGProduct {
	p := &MIGProduct{Name: name, Type: t, MemoryGB: gb, ComputeSlices: compute, Source: migGuide + table}
	for i, r := range rows {
		c, mem := parseProfileName(names[i])
		p.MemorySlices = max(p.MemorySlices, r.memSlices)
		p.Profiles = append(p.Profiles, MIGProfile{
			Name: names[i], ComputeSlices: c, MemorySlices: r.memSlices, MemoryGB: mem,
			CopyEngines: u[i].ce, Decoders: u[i].dec, JPEGs: u[i].jpeg, OFAs: u[i].ofa,
			MaxInstances: r.max, Starts: r.starts, NVMLProfile: r.nvml,
		})
	}
	return p
}

// parseProfileName reads "3g.40gb" or "1g.10gb+me" into 3 and 40. The names
// are this file's constants; a malformed one is a programmer error.
func parseProfileName(name string) (compute, memGB int) {
	g, rest, ok1 := strings.Cut(name, "g.")
	gb, _, ok2 := strings.Cut(rest, "gb")
	c, err1 := strconv.Atoi(g)
	m, err2 := strconv.Atoi(gb)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		panic("topology: malformed MIG profile name " + name)
	}
	return c, m
}
