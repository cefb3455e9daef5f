package main

import (
	"fmt"
	"strings"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/hw"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// rateNames are -rates' settings, in sim.Rates' terms.
var rateNames = []string{"learned", "probed", "grouped", "oracle", "model", "agnostic"}

// hiddenFor returns the sim.Hidden of a -rates setting: the policies see
// learned rates (from nothing; probed: each job trying every type once,
// scheduler.Explore.Probe; grouped: each job of a kind starting from
// what the earlier runs of its kind measured), the truth, the spec model (perfmodel/hw,
// each job profiled on one V100: Gavel's rate there) or the same rate on
// every type; every setting runs the same truth and noise.
func hiddenFor(name string, seed uint64) (*sim.Hidden, error) {
	h := &sim.Hidden{Seed: seed}
	switch name {
	case "learned":
		h.Rates = sim.RatesLearned
	case "probed":
		h.Rates, h.Explore.Probe = sim.RatesLearned, true
	case "grouped":
		h.Rates, h.Groups = sim.RatesLearned, true
	case "oracle":
		h.Rates = sim.RatesOracle
	case "agnostic":
		h.Rates = sim.RatesAgnostic
	case "model":
		h.Rates = sim.RatesModel
		var obs []perfmodel.Observation
		for _, o := range perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel's simulation table, V100 only") {
			if o.Type == topology.V100 {
				obs = append(obs, o)
			}
		}
		m, err := hw.Model(obs)
		if err != nil {
			return nil, fmt.Errorf("rates model: %w", err)
		}
		h.Model = m
	default:
		return nil, fmt.Errorf("unknown -rates setting %q (known: %s)", name, strings.Join(rateNames, ", "))
	}
	return h, nil
}
