package topology

import (
	"slices"
	"strings"
)

// GPUType names a kind of GPU, in lower case: "v100", "a100", or a free-form
// custom name such as "mi300x" or "v100-32gb". The well-known values below
// carry nominal hardware facts (see [GPUType.Info]); a custom type is equally
// valid and simply has none. Gavel's throughput table uses the keys "k80",
// "p100" and "v100", which are the constants of the same name.
// A GPUType is a plain string value, safe for concurrent use.
type GPUType string

// Well-known GPU types.
const (
	K80  GPUType = "k80"
	P100 GPUType = "p100"
	V100 GPUType = "v100"
	T4   GPUType = "t4"
	A10  GPUType = "a10"
	A100 GPUType = "a100"
	L4   GPUType = "l4"
	L40S GPUType = "l40s"
	H100 GPUType = "h100"
	H200 GPUType = "h200"
	B200 GPUType = "b200"
)

// GPUInfo holds nominal facts about a well-known GPU type, from NVIDIA's
// data sheets (SXM variants where there are several).
// It is a plain value, safe for concurrent use.
type GPUInfo struct {
	// Name is the product name.
	Name string
	// MemoryMiB is the memory of one GPU in MiB (the smallest common variant).
	MemoryMiB int
	// NVLinks is the number of NVLink links of one GPU; 0 if it has none.
	NVLinks int
	// NVLinkGBps is the bandwidth of one NVLink link, GB/s per direction.
	NVLinkGBps float64
	// PCIeGBps is the bandwidth of the GPU's PCIe x16 host link, GB/s per
	// direction.
	PCIeGBps float64
}

const (
	pcie3 = 15.75
	pcie4 = 31.5
	pcie5 = 63.0
)

var knownGPUs = map[GPUType]GPUInfo{
	K80:  {Name: "Tesla K80", MemoryMiB: 12 << 10, PCIeGBps: pcie3},
	P100: {Name: "Tesla P100", MemoryMiB: 16 << 10, NVLinks: 4, NVLinkGBps: 20, PCIeGBps: pcie3},
	V100: {Name: "Tesla V100", MemoryMiB: 16 << 10, NVLinks: 6, NVLinkGBps: 25, PCIeGBps: pcie3},
	T4:   {Name: "Tesla T4", MemoryMiB: 16 << 10, PCIeGBps: pcie3},
	A10:  {Name: "A10", MemoryMiB: 24 << 10, PCIeGBps: pcie4},
	A100: {Name: "A100", MemoryMiB: 40 << 10, NVLinks: 12, NVLinkGBps: 25, PCIeGBps: pcie4},
	L4:   {Name: "L4", MemoryMiB: 24 << 10, PCIeGBps: pcie4},
	L40S: {Name: "L40S", MemoryMiB: 48 << 10, PCIeGBps: pcie4},
	H100: {Name: "H100", MemoryMiB: 80 << 10, NVLinks: 18, NVLinkGBps: 25, PCIeGBps: pcie5},
	H200: {Name: "H200", MemoryMiB: 141 << 10, NVLinks: 18, NVLinkGBps: 25, PCIeGBps: pcie5},
	B200: {Name: "B200", MemoryMiB: 180 << 10, NVLinks: 18, NVLinkGBps: 50, PCIeGBps: pcie5},
}

// KnownGPUTypes returns the well-known GPU types, sorted by name.
func KnownGPUTypes() []GPUType {
	out := make([]GPUType, 0, len(knownGPUs))
	for t := range knownGPUs {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Info returns the nominal facts of a well-known type; ok is false for a
// custom type.
func (t GPUType) Info() (info GPUInfo, ok bool) {
	info, ok = knownGPUs[t]
	return info, ok
}

// Known reports whether t is one of the well-known types.
func (t GPUType) Known() bool {
	_, ok := knownGPUs[t]
	return ok
}

// maxTypeLen bounds the length of a GPU type name.
const maxTypeLen = 64

// ParseGPUType turns a user-written name into a GPUType: it trims spaces and
// lowers the case, so "V100" and " v100 " both give [V100]. Any name of 1 to
// 64 characters drawn from letters, digits, '.', '_' and '-' is valid;
// anything else is an error of kind [ErrInvalidGPUType].
func ParseGPUType(s string) (GPUType, error) {
	t, err := parseGPUType(s)
	if err != nil {
		return "", err
	}
	return t, nil
}

func parseGPUType(s string) (GPUType, *SpecError) {
	t := GPUType(strings.ToLower(strings.TrimSpace(s)))
	if err := t.validate(); err != nil {
		return "", err
	}
	return t, nil
}

// Validate reports whether t is a well-formed type name (see [ParseGPUType]);
// it must already be in lower case.
func (t GPUType) Validate() error {
	if err := t.validate(); err != nil {
		return err
	}
	return nil
}

func (t GPUType) validate() *SpecError {
	if t == "" {
		return specErr(ErrInvalidGPUType, "", "empty GPU type name")
	}
	if len(t) > maxTypeLen {
		return specErr(ErrInvalidGPUType, "", "GPU type name of %d bytes is longer than %d", len(t), maxTypeLen)
	}
	for _, r := range t {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return specErr(ErrInvalidGPUType, "", "GPU type %q: character %q is not allowed (use lower-case letters, digits, '.', '_' or '-')", string(t), r)
		}
	}
	return nil
}

// nominalMemoryMiB returns the nominal memory of a well-known type, or 0.
func (t GPUType) nominalMemoryMiB() int { return knownGPUs[t].MemoryMiB }
