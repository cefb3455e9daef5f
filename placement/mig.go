package placement

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// MIGGPU is one GPU the MIG planner may lay out: its product (whose profile
// table and placement rules apply) and its current GPU instances.
// It is a plain value, safe for concurrent reads.
type MIGGPU struct {
	// Ref locates the GPU in its cluster; the planner only reports it.
	Ref GPURef
	// Product is the GPU's MIG product; required.
	Product *topology.MIGProduct
	// Instances are the GPU instances that exist now. Busy ones run work
	// and stay where they are; idle ones may be reused or destroyed.
	Instances []MIGSlot
}

// MIGSlot is a GPU instance of a layout.
// It is a plain value, safe for concurrent reads.
type MIGSlot struct {
	topology.MIGInstance
	// Busy marks an instance that runs work now.
	Busy bool
	// New marks, in a plan, an instance the plan creates.
	New bool
	// Demand is, in a plan, the index of the demand the instance serves;
	// -1 for none (busy instances and idle ones left over).
	Demand int
}

// MIGDemand asks for Count GPU instances of a profile ("3g.40gb"), on any
// product that has it or, with Product set, on that product only.
// It is a plain value, safe for concurrent reads.
type MIGDemand struct {
	Profile string
	Product string
	Count   int
}

// MIGCost is what a plan costs, compared lexicographically in field order:
// demands left unplaced, then GPUs used (holding a busy or an assigned
// instance), then busy GPUs reconfigured, then GPUs reconfigured, then
// stranded compute slices.
//
// A GPU is reconfigured when any of its instances is created or destroyed.
// NVML can create instances in free slices beside running ones, but
// NVIDIA's MIG manager (mig-parted) applies a layout to a whole GPU and
// wants it idle, so a reconfigured busy GPU is counted apart: under
// mig-parted it has to be drained. Stranded slices are, summed over the
// GPUs, the free compute slices that no single new instance can use
// ([topology.MIGProduct.Stranded]): the layouts' fragmentation.
// It is a plain value, safe for concurrent reads.
type MIGCost struct {
	Unplaced, GPUs, BusyReconfigured, Reconfigured, Stranded int
}

// Less reports whether c is cheaper than o.
func (c MIGCost) Less(o MIGCost) bool {
	return cmp.Or(cmp.Compare(c.Unplaced, o.Unplaced), cmp.Compare(c.GPUs, o.GPUs),
		cmp.Compare(c.BusyReconfigured, o.BusyReconfigured), cmp.Compare(c.Reconfigured, o.Reconfigured),
		cmp.Compare(c.Stranded, o.Stranded)) < 0
}

func (c MIGCost) add(o MIGCost) MIGCost {
	return MIGCost{c.Unplaced + o.Unplaced, c.GPUs + o.GPUs, c.BusyReconfigured + o.BusyReconfigured,
		c.Reconfigured + o.Reconfigured, c.Stranded + o.Stranded}
}

// MIGPlan is the planner's answer.
// It is a plain value, safe for concurrent reads.
type MIGPlan struct {
	// Layouts holds each GPU's layout after the plan, in the order of the
	// input GPUs: busy instances where they were, kept idle ones, new ones.
	Layouts [][]MIGSlot
	// Changed marks the GPUs the plan reconfigures.
	Changed []bool
	// Placed is the number of instances given to each demand.
	Placed []int
	// Cost is the plan's cost.
	Cost MIGCost
	// Exact reports that the plan is optimal (the exact search ran).
	Exact bool
}

// MIGPlanner chooses per-GPU MIG layouts that serve demands for profiles
// at the least [MIGCost]: all demands placed if they can be, on the fewest
// GPUs, reconfiguring the fewest busy GPUs, then the fewest GPUs, then with
// the fewest stranded slices.
//
// Exact search: the valid layouts of each GPU that keep its busy instances
// are enumerated (from the product's placement rules; an A100 has 2,319
// layouts in all), reduced to the distinct offers they make to the demands,
// and a dynamic program over the GPUs, whose state is the demand still
// unserved, picks one per GPU (a multiple-choice knapsack with vector
// demands; Kellerer, Pferschy and Pisinger, "Knapsack Problems", 2004,
// chapter 11). It runs when its work (states times candidate layouts) is at
// most MaxWork.
//
// Heuristic above that: demands in decreasing size (memory slices, then
// compute slices), each instance first on an idle instance of its profile,
// else at the placement that opens the fewest GPUs, reconfigures the fewest
// busy GPUs and GPUs and strands the fewest slices, tightest GPU first (a
// first-fit-decreasing bin packing), destroying a GPU's unused idle
// instances when nothing else fits. Both answers are checked against the
// placement rules. The planner never changes a GPU; it returns layouts.
//
// A MIGPlanner is safe for concurrent use if not modified.
type MIGPlanner struct {
	// MaxWork bounds the exact search; 0 means 1<<22.
	MaxWork int
	// Heuristic skips the exact search.
	Heuristic bool
}

// Limits on the planner's input.
const (
	maxMIGDemand = 1 << 16
	maxMIGGPUs   = topology.MaxClusterGPUs
)

// Plan chooses the layouts. Bad input (a GPU without product, a current
// layout that breaks the rules, a demand for a profile no product has, a
// negative count, overlapping demands) is an error wrapping ErrBadRequest
// and, where it applies, topology's ErrUnknownProfile or
// ErrInvalidPlacement.
func (pl *MIGPlanner) Plan(ctx context.Context, gpus []MIGGPU, demands []MIGDemand) (*MIGPlan, error) {
	in, err := newMIGInput(gpus, demands)
	if err != nil {
		return nil, err
	}
	limit := pl.MaxWork
	if limit <= 0 {
		limit = 1 << 22
	}
	if !pl.Heuristic {
		if plan, err := in.exact(ctx, limit); err != nil || plan != nil {
			return plan, err
		}
	}
	return in.heuristic(ctx)
}

// migInput is the validated input with, for every GPU and profile, the
// demand the profile serves.
type migInput struct {
	gpus    []MIGGPU
	demands []MIGDemand
	// serves[g][pi] is the demand that profile pi of GPU g serves, or -1.
	serves [][]int
	// current[g] are the GPU's instances with their profile indices.
	current [][]migSlot
	// seen is the heuristic's scratch set of GPU states.
	seen map[hSig]bool
}

type migSlot struct {
	pi, start int
	busy      bool
}

func newMIGInput(gpus []MIGGPU, demands []MIGDemand) (*migInput, error) {
	if len(gpus) > maxMIGGPUs {
		return nil, fmt.Errorf("%w: %d GPUs (at most %d)", ErrBadRequest, len(gpus), maxMIGGPUs)
	}
	if err := checkDemands(demands); err != nil {
		return nil, err
	}
	in := &migInput{gpus: gpus, demands: demands, serves: make([][]int, len(gpus)), current: make([][]migSlot, len(gpus))}
	for g := range gpus {
		p := gpus[g].Product
		if p == nil {
			return nil, fmt.Errorf("%w: gpus[%d] has no MIG product", ErrBadRequest, g)
		}
		inst := make([]topology.MIGInstance, len(gpus[g].Instances))
		for i, s := range gpus[g].Instances {
			inst[i] = s.MIGInstance
		}
		if _, _, err := p.Check(inst); err != nil {
			return nil, fmt.Errorf("%w: gpus[%d] (%s): %w", ErrBadRequest, g, p.Name, err)
		}
		for _, s := range gpus[g].Instances {
			pi, _ := p.Profile(s.Profile)
			in.current[g] = append(in.current[g], migSlot{pi, s.Start, s.Busy})
		}
		in.serves[g] = make([]int, len(p.Profiles))
		for pi := range p.Profiles {
			in.serves[g][pi] = -1
			for d, dm := range demands {
				if dm.Profile == p.Profiles[pi].Name && (dm.Product == "" || dm.Product == p.Name) {
					in.serves[g][pi] = d
				}
			}
		}
	}
	return in, nil
}

func checkDemands(demands []MIGDemand) error {
	total := 0
	for d, dm := range demands {
		if dm.Count < 0 || dm.Count > maxMIGDemand {
			return fmt.Errorf("%w: demands[%d]: count %d (want 0 to %d)", ErrBadRequest, d, dm.Count, maxMIGDemand)
		}
		total += dm.Count
		if dm.Product != "" {
			p, err := topology.LookupMIGProduct(dm.Product)
			if err != nil {
				return fmt.Errorf("%w: demands[%d]: %w", ErrBadRequest, d, err)
			}
			if _, err := p.Profile(dm.Profile); err != nil {
				return fmt.Errorf("%w: demands[%d]: %w", ErrBadRequest, d, err)
			}
		} else if !anyProductHas(dm.Profile) {
			return fmt.Errorf("%w: demands[%d]: %w: no MIG product has a profile %q", ErrBadRequest, d, topology.ErrUnknownProfile, dm.Profile)
		}
		for e := range d {
			o := demands[e]
			if o.Profile == dm.Profile && (o.Product == "" || dm.Product == "" || o.Product == dm.Product) {
				return fmt.Errorf("%w: demands[%d] and demands[%d] both ask for %s; merge them or name distinct products", ErrBadRequest, e, d, dm.Profile)
			}
		}
	}
	if total > maxMIGDemand {
		return fmt.Errorf("%w: %d instances demanded (at most %d)", ErrBadRequest, total, maxMIGDemand)
	}
	return nil
}

func anyProductHas(profile string) bool {
	for _, p := range topology.MIGProducts() {
		if _, err := p.Profile(profile); err == nil {
			return true
		}
	}
	return false
}

// gpuCost is the cost of one GPU's final layout given how many of its
// instances serve demands.
func (in *migInput) gpuCost(g int, layout []MIGSlot) MIGCost {
	p := in.gpus[g].Product
	var c MIGCost
	busy, assigned := false, false
	count := make([]int, len(p.Profiles))
	var used uint32
	for _, s := range layout {
		pi, _ := p.Profile(s.Profile)
		count[pi]++
		used |= p.Profiles[pi].Mask(s.Start)
		busy = busy || s.Busy
		assigned = assigned || s.Demand >= 0
	}
	if busy || assigned {
		c.GPUs = 1
	}
	if in.changed(g, layout) {
		c.Reconfigured = 1
		if busy {
			c.BusyReconfigured = 1
		}
	}
	c.Stranded = p.Stranded(used, count)
	return c
}

// changed reports whether layout differs from the GPU's current instances.
func (in *migInput) changed(g int, layout []MIGSlot) bool {
	if len(layout) != len(in.gpus[g].Instances) {
		return true
	}
	for _, s := range layout {
		if s.New {
			return true
		}
	}
	return false
}

// finish checks the layouts against the rules and the input, and fills in
// the plan's cost and counts.
func (in *migInput) finish(plan *MIGPlan) (*MIGPlan, error) {
	plan.Placed = make([]int, len(in.demands))
	plan.Changed = make([]bool, len(in.gpus))
	for g, layout := range plan.Layouts {
		p := in.gpus[g].Product
		inst := make([]topology.MIGInstance, len(layout))
		for i, s := range layout {
			inst[i] = s.MIGInstance
			if s.Demand >= 0 {
				plan.Placed[s.Demand]++
				if pi, _ := p.Profile(s.Profile); in.serves[g][pi] != s.Demand {
					return nil, fmt.Errorf("placement: internal error: gpus[%d]: %s serves demand %d", g, s.Profile, s.Demand)
				}
			}
		}
		if _, _, err := p.Check(inst); err != nil {
			return nil, fmt.Errorf("placement: internal error: planned an invalid layout on gpus[%d]: %w", g, err)
		}
		for _, s := range in.gpus[g].Instances {
			if s.Busy && !slices.ContainsFunc(layout, func(t MIGSlot) bool { return t.Busy && t.MIGInstance == s.MIGInstance }) {
				return nil, fmt.Errorf("placement: internal error: gpus[%d]: busy %s at %d dropped", g, s.Profile, s.Start)
			}
		}
		plan.Changed[g] = in.changed(g, layout)
		plan.Cost = plan.Cost.add(in.gpuCost(g, layout))
	}
	for d, dm := range in.demands {
		if plan.Placed[d] > dm.Count {
			return nil, fmt.Errorf("placement: internal error: demand %d over-served", d)
		}
		plan.Cost.Unplaced += dm.Count - plan.Placed[d]
	}
	return plan, nil
}

// MIGGPUs lists the GPUs of c that are in MIG mode (their layouts become
// the current instances, all idle) and, with capable, also those of a MIG
// product that are not (they start with no instances). Mark busy instances
// in the result before planning.
func MIGGPUs(c *topology.Cluster, capable bool) ([]MIGGPU, error) {
	var out []MIGGPU
	for si := range c.Servers {
		for gi := range c.Servers[si].GPUs {
			g := &c.Servers[si].GPUs[gi]
			if g.MIG == nil && !capable {
				continue
			}
			p, err := g.MIGProduct()
			if err != nil {
				if g.MIG == nil {
					continue
				}
				return nil, fmt.Errorf("%w: server %q GPU %d: %w", ErrBadRequest, c.Servers[si].ID, gi, err)
			}
			m := MIGGPU{Ref: GPURef{Server: si, GPU: gi}, Product: p}
			if g.MIG != nil {
				for _, in := range g.MIG.Instances {
					m.Instances = append(m.Instances, MIGSlot{MIGInstance: in, Demand: -1})
				}
			}
			out = append(out, m)
		}
	}
	return out, nil
}
