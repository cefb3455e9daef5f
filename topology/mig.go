package topology

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// MIG (Multi-Instance GPU) partitions one GPU into GPU instances, each a
// profile ("3g.40gb": 3 compute slices, 40 GB) placed at a start memory
// slice. The tables below are those of NVIDIA's MIG user guide (section
// "Supported MIG Profiles", docs.nvidia.com/datacenter/tesla/mig-user-guide,
// release 580/590): for each product, its profiles with their compute
// slices, fraction of memory, copy engines, media engines and the number of
// instances available. A profile occupies as many memory slices as its
// placement size, and may start only at the slices NVIDIA allows; two
// instances may not share a memory slice ("Creation of new GPU instance will
// fail if there is overlap with the already occupied memory slices", NVML
// reference, nvmlDeviceGetGpuInstancePossiblePlacements_v2).
//
// Placements: the guide's "Getting Started with MIG" lists, for the A100
// 40 GB, 1g.5gb and 1g.5gb+me at {0,...,6} with size 1, 1g.10gb at {0,2,4,6}
// with size 2, 2g.10gb at {0,2,4} with size 2, 3g.20gb at {0,4} with size 4,
// 4g.20gb at {0} with size 4 and 7g.40gb at {0} with size 8 (nvidia-smi mig
// -lgipp); NVIDIA's technical blog on MIG for the H100 NVL lists the same.
// The guide draws the same placement figure for the H100, H200 and B200,
// whose tables have the same profile shapes and instance counts, so the same
// starts apply to every product with eight memory slices. The A30 has four
// memory slices: 1g at {0,1,2,3}, 2g at {0,2}, 4g at {0}, the only starts
// that give its tables' instance counts. These starts are not yet checked on
// an H200 or B200 (pending a hardware run of examples/discover).
//
// Left out, because the guide gives no table for them or no placement rules
// in text: GB200 and H20 (listed as supported, no profile table), the
// GH200 with 144 GB of HBM3e, the RTX PRO Blackwell products (their "+gfx",
// "+me.all" and "-me" profiles share media engines by rules the guide does
// not state), and the Thor iGPU.

// MIGProfile is one GPU instance profile of a MIG-capable product.
// It is a plain value, safe for concurrent reads.
type MIGProfile struct {
	// Name is the profile's name without the "MIG " prefix: "1g.10gb",
	// "1g.10gb+me" (with media extensions), "3g.40gb".
	Name string
	// ComputeSlices is the number of SM slices (the "g" of the name).
	ComputeSlices int
	// MemorySlices is the number of memory slices the instance occupies,
	// its placement size.
	MemorySlices int
	// MemoryGB is the nominal memory of the name, in GB.
	MemoryGB int
	// CopyEngines, Decoders (NVDEC), JPEGs (NVJPG) and OFAs (optical flow
	// accelerators) are the hardware units of one instance.
	CopyEngines, Decoders, JPEGs, OFAs int
	// MaxInstances is the number of instances of this profile that fit on
	// one GPU.
	MaxInstances int
	// Starts are the memory slices at which an instance may start.
	Starts []int
	// NVMLProfile is the index of the profile in nvml.h
	// (NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0, ..._1_SLICE_REV1 = 7 for +me,
	// ..._1_SLICE_REV2 = 9 for a 1g profile with two memory slices, ...).
	NVMLProfile int
}

// Media reports whether the profile carries media extensions ("+me").
func (p *MIGProfile) Media() bool { return strings.HasSuffix(p.Name, "+me") }

// Mask returns the memory slices an instance starting at start occupies, as
// a bit mask (bit i is slice i).
func (p *MIGProfile) Mask(start int) uint32 {
	return (uint32(1)<<p.MemorySlices - 1) << start
}

// MIGProduct is a MIG-capable GPU product and its profile table. Products
// are shared: treat them as read-only.
// It is a plain value, safe for concurrent reads.
type MIGProduct struct {
	// Name names the product: "a100-40gb", "h100-80gb", "h200-141gb", ...
	Name string
	// Type is the GPU type of the product (a variant "<type>-..." of it,
	// such as "gh200-480gb", matches too).
	Type GPUType
	// MemoryGB is the product's memory.
	MemoryGB int
	// ComputeSlices and MemorySlices count the slices of one GPU.
	ComputeSlices, MemorySlices int
	// Profiles are the product's profiles in the guide's order.
	Profiles []MIGProfile
	// Source cites the table.
	Source string
}

// Profile returns the index in p.Profiles of the named profile, or an error
// of kind [ErrUnknownProfile] that lists the profiles there are. A leading
// "MIG " (as NVML names profiles) is ignored.
func (p *MIGProduct) Profile(name string) (int, error) {
	i, err := p.profile(name)
	if err != nil {
		return -1, err
	}
	return i, nil
}

func (p *MIGProduct) profile(name string) (int, *SpecError) {
	name = strings.TrimPrefix(strings.TrimSpace(name), "MIG ")
	for i := range p.Profiles {
		if p.Profiles[i].Name == name {
			return i, nil
		}
	}
	names := make([]string, len(p.Profiles))
	for i := range p.Profiles {
		names[i] = p.Profiles[i].Name
	}
	return -1, specErr(ErrUnknownProfile, "", "%s has no MIG profile %q (it has %s)", p.Name, name, strings.Join(names, ", "))
}

// Placeable reports whether an instance of profile pi can start at start on
// a GPU whose occupied memory slices are used and which already holds
// count[pi] instances of that profile.
func (p *MIGProduct) Placeable(used uint32, count []int, pi, start int) bool {
	pf := &p.Profiles[pi]
	return count[pi] < pf.MaxInstances && slices.Contains(pf.Starts, start) && used&pf.Mask(start) == 0
}

// Free reports the compute slices not held by any instance of a layout with
// the given per-profile counts.
func (p *MIGProduct) Free(count []int) int {
	free := p.ComputeSlices
	for i, n := range count {
		free -= n * p.Profiles[i].ComputeSlices
	}
	return free
}

// Stranded returns the free compute slices that no single new instance can
// use: the free compute slices minus those of the largest profile that can
// still be placed. It is the external fragmentation of one GPU (the free
// space outside the largest usable block); 0 when the free space is usable
// as one instance.
func (p *MIGProduct) Stranded(used uint32, count []int) int {
	free := p.Free(count)
	best := 0
	for pi := range p.Profiles {
		c := p.Profiles[pi].ComputeSlices
		if c <= best {
			continue
		}
		for _, s := range p.Profiles[pi].Starts {
			if p.Placeable(used, count, pi, s) {
				best = c
				break
			}
		}
	}
	return free - best
}

// Check validates a layout of instances against the product: every profile
// is known, every start is one of its profile's starts, no two instances
// share a memory slice, no profile has more instances than it allows, and
// the compute slices add up to at most the GPU's. It returns the occupied
// memory slices and the number of instances of each profile, or an error of
// kind [ErrUnknownProfile] or [ErrInvalidPlacement] naming the instance.
func (p *MIGProduct) Check(instances []MIGInstance) (used uint32, count []int, err error) {
	count = make([]int, len(p.Profiles))
	if len(instances) > p.MemorySlices {
		return 0, nil, specErr(ErrInvalidPlacement, "", "%d instances on a %s, which has %d memory slices", len(instances), p.Name, p.MemorySlices)
	}
	for i, in := range instances {
		where := fmt.Sprintf("mig.instances[%d]", i)
		pi, err := p.profile(in.Profile)
		if err != nil {
			err.Where = where
			return 0, nil, err
		}
		pf := &p.Profiles[pi]
		switch {
		case !slices.Contains(pf.Starts, in.Start):
			return 0, nil, specErr(ErrInvalidPlacement, where, "%s may start at memory slice %s on a %s, not at %d", pf.Name, joinInts(pf.Starts), p.Name, in.Start)
		case used&pf.Mask(in.Start) != 0:
			return 0, nil, specErr(ErrInvalidPlacement, where, "%s at %d overlaps another instance (memory slices %s are taken)", pf.Name, in.Start, joinInts(maskSlices(used&pf.Mask(in.Start))))
		case count[pi] == pf.MaxInstances:
			return 0, nil, specErr(ErrInvalidPlacement, where, "a %s holds at most %d instance(s) of %s", p.Name, pf.MaxInstances, pf.Name)
		}
		used |= pf.Mask(in.Start)
		count[pi]++
	}
	if p.Free(count) < 0 {
		return 0, nil, specErr(ErrInvalidPlacement, "mig", "the instances use %d compute slices; a %s has %d", p.ComputeSlices-p.Free(count), p.Name, p.ComputeSlices)
	}
	return used, count, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return "{" + strings.Join(s, ",") + "}"
}

func maskSlices(m uint32) []int {
	var out []int
	for m != 0 {
		i := bits.TrailingZeros32(m)
		out = append(out, i)
		m &^= 1 << i
	}
	return out
}

// MIGInstance is one GPU instance of a layout: a profile placed at a start
// memory slice.
// It is a plain value, safe for concurrent reads.
type MIGInstance struct {
	// Profile is the profile's name, such as "3g.40gb".
	Profile string `json:"profile"`
	// Start is the first memory slice the instance occupies.
	Start int `json:"start"`
}

// MIGLayout is the MIG state of a GPU in MIG mode: which product's profile
// table applies and which GPU instances exist. A GPU with a nil layout is
// not in MIG mode. Layouts may be shared between GPUs by the builders:
// treat them as read-only.
// It is a plain value, safe for concurrent reads.
type MIGLayout struct {
	// Product names the product ([MIGProduct.Name]); empty means the
	// product that matches the GPU's type and memory ([MIGProductFor]).
	Product string `json:"product,omitempty"`
	// Instances are the GPU instances, in any order.
	Instances []MIGInstance `json:"instances"`
}

// MIGProduct returns the product whose profile table applies to g: the one
// its layout names, else the one matching its type and memory. The error is
// of kind [ErrNoMIG] for a type without MIG and [ErrUnknownProfile] for an
// unknown product name.
func (g *GPU) MIGProduct() (*MIGProduct, error) {
	if g.MIG != nil && g.MIG.Product != "" {
		p, err := LookupMIGProduct(g.MIG.Product)
		if err != nil {
			return nil, err
		}
		if !p.matches(g.Type) {
			return nil, specErr(ErrInvalidPlacement, "mig.product", "product %s is a %s, but the GPU is a %s", p.Name, p.Type, g.Type)
		}
		return p, nil
	}
	return MIGProductFor(g.Type, g.MemoryMiB)
}

// validateMIG checks the MIG layout of g, if any.
func (g *GPU) validateMIG() error {
	if g.MIG == nil {
		return nil
	}
	p, err := g.MIGProduct()
	if err != nil {
		return err
	}
	_, _, err = p.Check(g.MIG.Instances)
	return err
}

func (p *MIGProduct) matches(t GPUType) bool {
	return t == p.Type || strings.HasPrefix(string(t), string(p.Type)+"-")
}

// MIGProducts returns the products with a MIG profile table, sorted by name.
// They are shared: treat them as read-only.
func MIGProducts() []*MIGProduct {
	return migProducts
}

// LookupMIGProduct returns the product of the given name ("h100-80gb"), or
// an error of kind [ErrUnknownProfile] that lists the products there are.
func LookupMIGProduct(name string) (*MIGProduct, error) {
	for _, p := range migProducts {
		if p.Name == name {
			return p, nil
		}
	}
	names := make([]string, len(migProducts))
	for i, p := range migProducts {
		names[i] = p.Name
	}
	return nil, specErr(ErrUnknownProfile, "", "no MIG product %q (known: %s)", name, strings.Join(names, ", "))
}

// MIGProductFor returns the product of GPU type t (or a variant "<type>-...")
// whose memory is nearest to memoryMiB, within 10%. A type without any MIG
// product, or a memory size no product of the type has, is an error of kind
// [ErrNoMIG].
func MIGProductFor(t GPUType, memoryMiB int) (*MIGProduct, error) {
	var best *MIGProduct
	gb := float64(memoryMiB) / 1024
	for _, p := range migProducts {
		if p.matches(t) && (best == nil || math.Abs(float64(p.MemoryGB)-gb) < math.Abs(float64(best.MemoryGB)-gb)) {
			best = p
		}
	}
	switch {
	case best == nil:
		return nil, specErr(ErrNoMIG, "", "GPU type %s has no MIG (MIG products: %s)", t, migTypes())
	case math.Abs(float64(best.MemoryGB)-gb) > 0.1*float64(best.MemoryGB):
		return nil, specErr(ErrNoMIG, "", "no MIG product of type %s has about %d MiB of memory (nearest: %s)", t, memoryMiB, best.Name)
	}
	return best, nil
}

func migTypes() string {
	var ts []string
	for _, p := range migProducts {
		if !slices.Contains(ts, string(p.Type)) {
			ts = append(ts, string(p.Type))
		}
	}
	slices.Sort(ts)
	return strings.Join(ts, ", ")
}

// MIGSliceType returns the GPU type that allocation policies use for the
// instances of one profile of a product: "<product>-<profile>", with "+"
// written as "_" ("h100-80gb-3g.40gb", "a100-40gb-1g.5gb_me").
func MIGSliceType(p *MIGProduct, profile string) GPUType {
	return GPUType(p.Name + "-" + strings.ReplaceAll(profile, "+", "_"))
}

// ParseMIGSliceType reads a type made by [MIGSliceType]; ok is false for
// any other type.
func ParseMIGSliceType(t GPUType) (p *MIGProduct, profile int, ok bool) {
	for _, q := range migProducts {
		rest, found := strings.CutPrefix(string(t), q.Name+"-")
		if !found {
			continue
		}
		if pi, err := q.Profile(strings.ReplaceAll(rest, "_", "+")); err == nil {
			return q, pi, true
		}
	}
	return nil, -1, false
}

// FractionType returns the GPU type of a share f (0 < f <= 1) of a GPU of
// type t shared by time slicing, as allocation policies see it:
// "<t>-frac<f>" ("a100-frac0.5"). An f out of range, or a name that would
// be too long, is an error of kind [ErrInvalidCount].
func FractionType(t GPUType, f float64) (GPUType, error) {
	if !(f > 0 && f <= 1) {
		return "", specErr(ErrInvalidCount, "", "GPU fraction %v (want 0 < f <= 1)", f)
	}
	ft := GPUType(string(t) + "-frac" + strconv.FormatFloat(f, 'f', -1, 64))
	if err := ft.Validate(); err != nil {
		return "", err
	}
	return ft, nil
}

// ParseFractionType reads a type made by [FractionType]; ok is false for
// any other type.
func ParseFractionType(t GPUType) (base GPUType, f float64, ok bool) {
	i := strings.LastIndex(string(t), "-frac")
	if i <= 0 {
		return "", 0, false
	}
	f, err := strconv.ParseFloat(string(t)[i+len("-frac"):], 64)
	if err != nil || !(f > 0 && f <= 1) {
		return "", 0, false
	}
	return t[:i], f, true
}
