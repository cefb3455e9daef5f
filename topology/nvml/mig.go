//go:build nvml

package nvml

import (
	"cmp"
	"fmt"
	"slices"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpusched/gpusched/topology"
)

// migLayout reads the GPU instances of g, a GPU in MIG mode, into a layout
// of the product that matches its type and memory: for every profile of the
// product's table, the profile's info by its nvml.h index
// (GetGpuInstanceProfileInfo), its instances (GetGpuInstances) and each
// instance's placement (GetInfo: start and size in memory slices). It only
// reads; it never creates, destroys or reconfigures anything.
//
// A GPU whose product has no table here, an instance whose size is not its
// profile's, or a layout that breaks the placement rules gives a nil layout
// and an error saying why, so that discovery still describes the GPU.
func migLayout(dev gonvml.Device, g *topology.GPU) (*topology.MIGLayout, error) {
	p, err := topology.MIGProductFor(g.Type, g.MemoryMiB)
	if err != nil {
		return nil, err
	}
	layout := &topology.MIGLayout{Product: p.Name, Instances: []topology.MIGInstance{}}
	for pi := range p.Profiles {
		pf := &p.Profiles[pi]
		info, ret := dev.GetGpuInstanceProfileInfo(pf.NVMLProfile)
		if ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_INVALID_ARGUMENT {
			continue // the driver does not offer this profile
		}
		if ret != gonvml.SUCCESS {
			return nil, fmt.Errorf("profile %s: %w", pf.Name, ret)
		}
		gis, ret := dev.GetGpuInstances(&info)
		if ret != gonvml.SUCCESS {
			return nil, fmt.Errorf("instances of %s: %w", pf.Name, ret)
		}
		if len(gis) > p.MemorySlices {
			return nil, fmt.Errorf("%d instances of %s on a GPU of %d memory slices", len(gis), pf.Name, p.MemorySlices)
		}
		for _, gi := range gis {
			gii, ret := gi.GetInfo()
			if ret != gonvml.SUCCESS {
				return nil, fmt.Errorf("instance of %s: %w", pf.Name, ret)
			}
			if int(gii.Placement.Size) != pf.MemorySlices {
				return nil, fmt.Errorf("instance %d of %s spans %d memory slices; the profile takes %d", gii.Id, pf.Name, gii.Placement.Size, pf.MemorySlices)
			}
			layout.Instances = append(layout.Instances, topology.MIGInstance{Profile: pf.Name, Start: int(gii.Placement.Start)})
		}
	}
	slices.SortFunc(layout.Instances, func(a, b topology.MIGInstance) int { return cmp.Compare(a.Start, b.Start) })
	if _, _, err := p.Check(layout.Instances); err != nil {
		return nil, err
	}
	return layout, nil
}
