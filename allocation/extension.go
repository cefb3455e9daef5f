package allocation

import (
	"fmt"

	"github.com/gpusched/gpusched/allocation/lp"
)

// Extension changes the linear program of MaxMinFairness (Gavel's
// max-min LP, Narayanan et al., OSDI 2020, section 4.1, equation 1) after
// the built-in has built it and before it is solved: extra bounds on a
// job's time fractions, extra rows, objective terms beside the max-min
// level. The built-in keeps its speed: jobs that are interchangeable (same
// scale factor, weight, rates, and Key) share one set of variables, a
// unit. An extension that adds nothing leaves the LP as it was, so a
// variant reproduces the built-in bit for bit at its neutral setting
// (docs/compare.md). Implementations are called from Allocate's
// goroutine; one used by concurrent Allocate calls must be safe for
// concurrent use (hold no state, as the example's cap does).
type Extension interface {
	// Key returns what, besides its scale factor, weight and rates,
	// decides the part in the extension of p.Jobs[m] (m is an index, not
	// a job ID): jobs with different keys never share variables. Return "" where the extension treats all
	// jobs alike (a cap on every job), a job's tenant where it bounds
	// tenants.
	Key(p *Problem, m int) string
	// Extend adds to the program. An error stops the allocation and is
	// returned wrapped.
	Extend(g *Program) error
}

// Program is MaxMinFairness's LP as an Extension sees it: the model, each
// unit's variables (a unit is one job or a group of interchangeable jobs
// that share variables; each variable is the time fraction of every job of
// the unit), and the max-min level. Valid only during Extend; not safe
// for concurrent use.
type Program struct {
	p     *Problem
	m     *lp.Model
	units [][]int
	x     [][]int
	level int
	scale []float64
	rates [][]float64
}

// Problem returns the problem being allocated (do not change it).
func (g *Program) Problem() *Problem { return g.p }

// Model returns the LP: add variables and rows, set bounds and objective
// coefficients. Its sense is lp.Maximize (a penalty is a negative
// coefficient); its objective is the level's 1. A coefficient on a
// unit's variable counts once for the unit, however many jobs it holds:
// weigh it by len(Jobs(u)) for one per job.
func (g *Program) Model() *lp.Model { return g.m }

// Units returns the number of units.
func (g *Program) Units() int { return len(g.units) }

// Jobs returns the jobs of unit u (indices into Problem.Jobs).
func (g *Program) Jobs(u int) []int { return g.units[u] }

// X returns the variable of unit u's time fraction on type k (the time of
// each of its jobs, Gavel's X_mk), or -1 where the job cannot run there.
// The time rows (sum_k X_mk <= 1) and capacity rows (sum_m sf_m X_mk <=
// n_k) are in; a capacity row counts each variable once per job of its
// unit.
func (g *Program) X(u, k int) int { return g.x[u][k] }

// Level returns the variable of the max-min level t (the objective): each
// unit has the row t <= Normaliser(u) sum_k Rate(u, k) X(u, k), unless
// Normaliser(u) is 0 (the unit cannot run).
func (g *Program) Level() int { return g.level }

// Normaliser returns sf_m / (w_m T^prop_m) of the unit's jobs.
func (g *Program) Normaliser(u int) float64 { return g.scale[g.units[u][0]] }

// Rate returns the rate the level row counts for unit u on type k (1 on
// every type for Agnostic).
func (g *Program) Rate(u, k int) float64 { return g.rates[g.units[u][0]][k] }

// extend runs the extension over a program.
func extend(ext Extension, g *Program) error {
	if err := ext.Extend(g); err != nil {
		return fmt.Errorf("extension: %w", err)
	}
	return nil
}

// TimeCap is an Extension that gives no job more than Share of its time
// over all types together (sum_k X_mk <= Share): max-min fairness that
// leaves every job idle part of the time, for instance to keep room for
// arrivals. At Share 1 or more the bound is the time row already there,
// so it adds nothing (the built-in, bit for bit); a Share of 0 or less,
// or not a number, is an error. It is a plain value, safe for concurrent
// use; its code is the pattern for an extension of one's own
// (docs/compare.md).
type TimeCap struct{ Share float64 }

// Key implements Extension: the cap treats every job alike.
func (TimeCap) Key(*Problem, int) string { return "" }

// Extend implements Extension: one row per unit.
func (c TimeCap) Extend(g *Program) error {
	if c.Share >= 1 {
		return nil
	}
	if !(c.Share > 0) {
		return invalid("time cap %v: want a share above 0", c.Share)
	}
	var idx []int
	var val []float64
	for u := range g.Units() {
		idx, val = idx[:0], val[:0]
		for k := range g.Problem().Types {
			if v := g.X(u, k); v >= 0 {
				idx, val = append(idx, v), append(val, 1)
			}
		}
		if len(idx) > 0 {
			g.Model().AddRow(-lp.Inf, c.Share, idx, val)
		}
	}
	return nil
}
