package planner

import (
	"context"

	"github.com/shardplan/shardplan/internal/sharding"
)

// Choosing among the candidates: the order of pickBest and the plan's totals.

// choose is the choose phase: the plan pickBest prefers among the candidates found
// within the memory budget, with its certificate, its bounds, and every candidate in
// its summary. The error is a *BudgetError when none fits the budget, a *NoPlanError
// when there is none, or ctx's error (a router may have stopped: the candidates'
// prices are then meaningless).
func choose(ctx context.Context, r *Request, f searched) (*Plan, error) {
	// A plan searched after ctx was done is priced from stopped routers and cut-short
	// coverage checks (dimCovered): the answer is ctx's error.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cands := f.cands
	if r.MemoryBudget > 0 {
		cands = withinBudget(cands, r.MemoryBudget)
		if len(cands) == 0 {
			return nil, budgetError(ctx, r)
		}
	}
	if len(cands) == 0 {
		return nil, &NoPlanError{Need: []Op{OpAllToAllV, OpAllGather, OpSlice}}
	}
	best := pickBest(cands, r.AllowFullRemat)
	best.Summary.Optimality = OptimalityBestFound
	if f.proven {
		best.Summary.Optimality = OptimalityProven
	}
	best.candidates = cands
	best.search = f.stats
	best.Summary.SearchExpansions = f.stats.expansions
	best.finishWith(f.bounds)
	for _, c := range cands {
		c.finishTotals()
		best.Summary.Candidates = append(best.Summary.Candidates, Candidate{Name: c.name, Steps: len(c.Steps), TimeUS: c.Summary.TimeUS, BytesPerDevice: c.Summary.BytesPerDevice, Chosen: c == best})
	}
	return best, nil
}

// pickBest prefers plans without full rematerialization (unless allowRemat), then the
// lowest time, then fewer steps.
func pickBest(cands []*Plan, allowRemat bool) *Plan {
	best := cands[0]
	for _, c := range cands[1:] {
		c.finishTotals()
		best.finishTotals()
		if better(c, best, allowRemat) {
			best = c
		}
	}
	return best
}

func better(a, b *Plan, allowRemat bool) bool {
	if !allowRemat && a.Summary.FullRematerialization != b.Summary.FullRematerialization {
		return !a.Summary.FullRematerialization
	}
	const eps = 1e-9
	if a.Summary.TimeUS < b.Summary.TimeUS-eps {
		return true
	}
	if a.Summary.TimeUS > b.Summary.TimeUS+eps {
		return false
	}
	// At equal time: fewer communication steps (collectives; local slices are free),
	// then standard collectives over collective_permute over all_to_all_v (every
	// backend runs the standard ones, and they are what XLA and Shardy emit), then fewer
	// steps in all.
	if a.Summary.Collectives != b.Summary.Collectives {
		return a.Summary.Collectives < b.Summary.Collectives
	}
	if ar, br := a.p2pRank(), b.p2pRank(); ar != br {
		return ar < br
	}
	if len(a.Steps) != len(b.Steps) {
		return len(a.Steps) < len(b.Steps)
	}
	return a.Summary.BytesPerDevice < b.Summary.BytesPerDevice
}

// finishTotals fills the totals that do not need the lower bound.
func (p *Plan) finishTotals() {
	s := &p.Summary
	s.Strategy = Optimal
	s.Collectives, s.TimeUS, s.BytesPerDevice = 0, 0, 0
	r := p.Request
	srcRep, tgtRep := r.Source.IsFullyReplicated(), r.Target.IsFullyReplicated()
	s.PeakBytesPerDevice = bufferBytes(r, r.Source)
	s.FullRematerialization = false
	for i, st := range p.Steps {
		if st.Op != OpSlice {
			s.Collectives++
		}
		s.TimeUS += st.Cost.TimeUS
		s.BytesPerDevice += st.BytesPerDevice
		s.PeakBytesPerDevice = max(s.PeakBytesPerDevice, bufferBytes(r, st.After))
		if i < len(p.Steps)-1 && !srcRep && !tgtRep && st.After.IsFullyReplicated() && len(r.Shape) > 0 {
			s.FullRematerialization = true
		}
	}
}

// finishWith fills the plan's summary: its totals, and its lower bounds and
// efficiencies from the request's bounds b (boundsOf, or the side work's).
func (p *Plan) finishWith(b reshardBounds) {
	p.finishTotals()
	s := &p.Summary
	s.LowerBoundBytesPerDevice = b.lb
	s.Efficiency = 1
	if s.BytesPerDevice > 0 {
		s.Efficiency = float64(b.lb) / float64(s.BytesPerDevice)
	}
	s.TimeLowerBoundUS = b.time
	s.TimeEfficiency = 1
	if s.TimeUS > 0 {
		s.TimeEfficiency = s.TimeLowerBoundUS / s.TimeUS
	}
}

// bufferBytes is the padded local buffer size of s.
func bufferBytes(r *Request, s sharding.Sharding) int64 {
	n := int64(1)
	for d, c := range s.ShardCounts() {
		n *= sharding.CeilDiv(r.Shape[d], int64(c))
	}
	return sharding.BufferBytes(n, r.ElemBits)
}

func localShape(r *Request, s sharding.Sharding) []int64 {
	out := make([]int64, len(r.Shape))
	for d, c := range s.ShardCounts() {
		out[d] = sharding.CeilDiv(r.Shape[d], int64(c))
	}
	return out
}

// p2pRank is 2 when p uses all_to_all_v, 1 when it uses collective_permute, else 0.
func (p *Plan) p2pRank() int {
	rank := 0
	for _, s := range p.Steps {
		switch s.Op {
		case OpAllToAllV:
			return 2
		case OpCollectivePermute:
			rank = 1
		}
	}
	return rank
}
