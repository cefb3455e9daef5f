package gpusched

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.PlacementScorePlugin = (*Plugin)(nil)

// PlacementScoreExtensions implements fwk.PlacementScorePlugin: none.
func (pl *Plugin) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return nil }

// ScorePlacement implements fwk.PlacementScorePlugin: in Kubernetes 1.37's
// pod group cycle, of the placements a generator offers for a whole
// PodGroup (several only with TopologyAwareWorkloadScheduling, alpha in
// 1.37; with one placement the framework does not call it, and the
// per-pod score keeps the members close), it prefers the one whose
// members are closest: over every pair of members, 3 for one node, 2 for
// one NVLink domain, 1 for one rack, 0 else, as a share of the most
// (every pair on one node), from 0 to fwk.MaxScore. A placement of
// fewer than two members scores 0.
func (pl *Plugin) ScorePlacement(_ context.Context, _ fwk.PlacementCycleState, _ fwk.PodGroupInfo, placement *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	if placement == nil {
		return 0, nil
	}
	places := make([]Place, 0, len(placement.ProposedAssignments))
	for _, a := range placement.ProposedAssignments {
		if a == nil {
			continue
		}
		p, ok := pl.ledger.PlaceOf(a.GetNodeName())
		if !ok {
			p = Place{Node: a.GetNodeName()} // no GPUs gpusched manages: its node only
		}
		places = append(places, p)
	}
	return closeness(places), nil
}

// closeness scores how close places are, pair by pair (ScorePlacement).
func closeness(places []Place) int64 {
	n := len(places)
	if n < 2 {
		return 0
	}
	var sum, pairs int64
	for i := range places {
		for j := i + 1; j < n; j++ {
			a, b := places[i], places[j]
			switch {
			case a.Node == b.Node:
				sum += 3
			case a.Domain != "" && a.Domain == b.Domain:
				sum += 2
			case a.Rack != "" && a.Rack == b.Rack:
				sum += 1
			}
			pairs++
		}
	}
	return sum * fwk.MaxScore / (3 * pairs)
}
