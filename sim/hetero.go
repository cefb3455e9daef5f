package sim

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/elastic"
)

// HeteroConfig describes a simulation of elastic jobs on a heterogeneous
// cluster, the setting of Sia (Jayaram Subramanya et al., "Sia:
// Heterogeneity-aware, goodput-optimized ML-cluster scheduling", SOSP
// 2023, sections 3 and 4.3): Pools gives each GPU type's nodes; every
// Interval the Policy chooses each job's pool and workers (elastic.Sia,
// or a heterogeneity-unaware policy through elastic.Unaware, or Gavel's
// rounds through GavelRounds); jobs start, grow, shrink or move between
// pools, paying RestartOverhead for every change (and, with ChargeStart,
// their first start); each runs at its curve on its pool (Job.Curves),
// on the servers it was placed on, packed on as few servers as possible.
// There is no inference cluster to loan from.
//
// It is a plain value, safe for concurrent reads (its Policy decides
// whether runs may share it).
type HeteroConfig struct {
	Pools  []elastic.Pool
	Policy elastic.TypedPolicy
	// Interval is the policy's period (60 s if zero; Gavel's rounds are
	// 360 s), 0 or in [MinPeriod, MaxPeriod].
	Interval float64
	// RestartOverhead and ChargeStart are as in ElasticConfig.
	RestartOverhead float64
	ChargeStart     bool
	// EveryInterval calls the policy every interval, not only after an
	// arrival, a completion or a start that did not fit.
	EveryInterval bool
	// MaxIntervals bounds the intervals (0 means DefaultMaxSteps).
	MaxIntervals int
}

// RunHetero simulates the jobs (in any order) to completion on a
// heterogeneous cluster, with the steps of RunElastic (arrivals,
// allocation, sampling, execution, advance; no loans). Jobs give a curve
// per pool (Job.Curves, nil where a job cannot run) or one Curve for
// every pool. Input out of range is an error wrapping elastic.ErrInvalid:
// pools (1 to elastic.MaxPools, nodes and GPUs per node as for a Cluster),
// jobs (elastic.Job.Validate; Curves of one entry per pool; a base demand
// that fits on some pool where the job can run), a policy's answer for a
// pool where the job cannot run; run limits as for RunElastic.
// ElasticResult.PoolBusy gives the busy GPU-seconds of each pool;
// TrainingCapacity and TrainingBusy cover all pools.
func RunHetero(ctx context.Context, cfg HeteroConfig, jobs []elastic.Job) (*ElasticResult, error) {
	if cfg.Policy == nil {
		return nil, fmt.Errorf("%w: no policy", elastic.ErrInvalid)
	}
	if len(cfg.Pools) == 0 || len(cfg.Pools) > elastic.MaxPools {
		return nil, fmt.Errorf("%w: %d pools, want 1 to %d", elastic.ErrInvalid, len(cfg.Pools), elastic.MaxPools)
	}
	ec := ElasticConfig{Policy: noPolicy{}, Interval: cfg.Interval, RestartOverhead: cfg.RestartOverhead, ChargeStart: cfg.ChargeStart,
		EveryInterval: cfg.EveryInterval, Pack: true, MaxIntervals: cfg.MaxIntervals}
	dt, orchDT, limit, err := checkElastic(ec)
	if err != nil {
		return nil, err
	}
	pools := make([]*elastic.Cluster, len(cfg.Pools))
	servers := 0
	for k, p := range cfg.Pools {
		servers += p.Nodes
		if p.Nodes < 0 || servers > elastic.MaxServers {
			return nil, fmt.Errorf("%w: pool %d (%s) of %d nodes: more than %d servers in all", elastic.ErrInvalid, k, p.Type, p.Nodes, elastic.MaxServers)
		}
		c, err := elastic.NewCluster(p.Nodes, p.GPUsPerNode)
		if err != nil {
			return nil, fmt.Errorf("sim: pool %d (%s): %w", k, p.Type, err)
		}
		c.SetPacking(true)
		pools[k] = c
	}
	e, err := prepareElastic(ec, dt, orchDT, limit, pools, cfg.Pools, jobs)
	if err != nil {
		return nil, err
	}
	e.typed, e.shape = cfg.Policy, cfg.Pools
	return e.loop(ctx)
}

// noPolicy stands in ElasticConfig.Policy for a typed run, which never
// calls it.
type noPolicy struct{}

func (noPolicy) Allocate([]elastic.State, int) ([]int, error) {
	return nil, fmt.Errorf("%w: no policy", elastic.ErrInvalid)
}
