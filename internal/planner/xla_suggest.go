package planner

import (
	"context"
	"math"
	"slices"

	"github.com/shardplan/shardplan/internal/sharding"
)

// xlaHopSteps is the priced steps of a hop XLA takes, without the plan's totals and
// bounds: a chain's hops are summed and bounded once, as the chain (chainThrough), and
// the time bound of every hop was a sixth of the suggestion search's time.
func xlaHopSteps(r *Request, from, to sharding.Sharding) ([]Step, error) {
	h := *r
	h.Source, h.Target = from, to
	e, err := xlaEmulate(&h)
	if err != nil {
		return nil, err
	}
	return e.steps(), nil
}

// xlaHopFallsBack is xlaHop's verdict alone, without pricing the plan (ok false when
// the hop cannot be emulated).
func xlaHopFallsBack(r *Request, from, to sharding.Sharding) (fallback, ok bool) {
	h := *r
	h.Source, h.Target = from, to
	e, err := xlaEmulate(&h)
	if err != nil {
		return false, false
	}
	return e.fallback, true
}

func hasSubAxis(s sharding.Sharding) bool {
	for _, r := range s.UsedAxes() {
		if !r.IsFull() {
			return true
		}
	}
	return false
}

// suggestXLAWith is suggestXLA given r's bounds (b): the optimal plan of standard
// collectives and the chain reshard r's ends, and ReshardXLA has bounded its own plan
// already.
func suggestXLAWith(ctx context.Context, r *Request, b reshardBounds) ([]Suggestion, *Plan, string) {
	lists := suggestionStates(ctx, r, &b)
	var bestOut []Suggestion
	var best *Plan
	for _, states := range lists {
		if out, chain := chainThrough(ctx, r, states, b); chain != nil && (best == nil || betterChain(r, out, chain, bestOut, best)) {
			bestOut, best = out, chain
		}
	}
	if best != nil {
		return bestOut, best, ""
	}
	if len(lists) == 0 {
		return nil, nil, "the plans of standard collectives offer no intermediate sharding short of full replication, so no constraint can avoid XLA's fallback"
	}
	return nil, nil, "XLA falls back on some hop of every chain of intermediate shardings tried (the optimal plan's states and one collective per hop); reshard in two steps through a sharding that shards the dims differently, or use the optimal strategy's plan"
}

// betterChain reports whether the chain of suggestions out (XLA's plan through them,
// chain) beats the best so far for r: when r's ends name no sub-axis (so that
// PartitionSpecs and DTensor placements can say them), a chain whose every suggestion
// a PartitionSpec names beats one with a sub-axis; then the faster plan wins, and an
// equal one keeps the earlier list's.
func betterChain(r *Request, out []Suggestion, chain *Plan, bestOut []Suggestion, best *Plan) bool {
	if !hasSubAxis(r.Source) && !hasSubAxis(r.Target) {
		if a, b := namesSubAxis(out), namesSubAxis(bestOut); a != b {
			return !a
		}
	}
	return chain.Summary.TimeUS < best.Summary.TimeUS*(1-1e-9)
}

// namesSubAxis reports whether some suggestion of out names a sub-axis.
func namesSubAxis(out []Suggestion) bool {
	return slices.ContainsFunc(out, func(s Suggestion) bool { return hasSubAxis(s.Sharding) })
}

// suggestionStates lists chains of shardings from r.Source to r.Target (both included)
// that a suggestion may pass through; b are r's bounds.
func suggestionStates(ctx context.Context, r *Request, b *reshardBounds) (lists [][]sharding.Sharding) {
	rr := *r
	rr.bounds = b
	rr.noAnytime = true
	// Constraints need intermediate states: a single point-to-point exchange has none,
	// so the chain comes from the best plan of standard collectives.
	rr.AllowedOps = []Op{OpSlice, OpAllGather, OpAllToAll, OpCollectivePermute, OpReduceScatter, OpAllReduce}
	// A plan that rematerializes still offers its states short of the replicated one
	// (a gather that keeps some dim sharded is often a hop XLA takes); they are tried
	// last.
	var remat []sharding.Sharding
	endsSharded := !r.Source.IsFullyReplicated() && !r.Target.IsFullyReplicated()
	if opt, err := Reshard(ctx, &rr); err == nil && len(opt.Steps) > 0 {
		states := []sharding.Sharding{r.Source}
		for i, st := range opt.Steps {
			if i < len(opt.Steps)-1 && endsSharded && st.After.IsFullyReplicated() {
				continue
			}
			states = append(states, st.After)
		}
		switch {
		case !opt.Summary.FullRematerialization:
			lists = append(lists, states)
		case len(states) > 2:
			remat = states
		}
	}
	defer func() {
		if remat != nil {
			lists = append(lists, remat)
		}
	}()
	// Greedy plans, one collective per hop, from the atom space of both ends.
	sp, ok := newSpace(r.Mesh, r.Shape, r.ElemBits, r.Source, r.Target)
	if !ok || len(r.Source.Unreduced) > 0 {
		return lists
	}
	start, goal := sp.stateOf(r.Source), sp.stateOf(r.Target)
	rep := !r.Source.IsFullyReplicated() && !r.Target.IsFullyReplicated()
	for _, mv := range [][]move{sp.constructWith(&rr, start, goal, math.MaxInt64, rep, false), sp.constructWith(&rr, start, goal, math.MaxInt64, rep, true)} {
		if mv == nil {
			continue
		}
		states := []sharding.Sharding{r.Source}
		for _, m := range mv {
			states = append(states, sp.sharding(m.after, r.Target.Unreduced))
		}
		lists = append(lists, states)
	}
	return lists
}

// chainThrough is the shortest chain of hops XLA handles without its fallback through
// states (in order; each state also tried with its sub-axes of one axis put back in
// major-to-minor order, which P() can often name); b are r's bounds, the chain's.
func chainThrough(ctx context.Context, r *Request, states []sharding.Sharding, b reshardBounds) ([]Suggestion, *Plan) {
	type node struct {
		pos int
		s   sharding.Sharding
	}
	nodes := []node{{0, states[0]}}
	for k, s := range states[1:] {
		nodes = append(nodes, node{k + 1, s})
		if k+2 < len(states) {
			if ns := sortSubAxes(s, r.Mesh); !ns.SameLayout(s) && ns.Validate(r.Mesh, r.Shape, "") == nil {
				nodes = append(nodes, node{k + 1, ns})
			}
		}
	}
	last := len(nodes) - 1
	if nodes[last].pos == 0 {
		return nil, nil
	}
	const inf = 1 << 30
	best := make([]int, len(nodes))
	prev := make([]int, len(nodes))
	for j := 1; j <= last; j++ {
		best[j] = inf
		w := 1
		if j < last && hasSubAxis(nodes[j].s) {
			w = 100
		}
		for i := 0; i < j; i++ {
			if best[i] >= inf || nodes[i].pos >= nodes[j].pos || ctx.Err() != nil {
				continue
			}
			if c := best[i] + w; c >= best[j] {
				continue // a hop is never cheaper than its weight: skip the emulation
			}
			if fb, ok := xlaHopFallsBack(r, nodes[i].s, nodes[j].s); !ok || fb {
				continue
			}
			best[j], prev[j] = best[i]+w, i
		}
	}
	if best[last] >= inf {
		return nil, nil
	}
	var path []int
	for j := last; j > 0; j = prev[j] {
		path = append(path, j)
	}
	slices.Reverse(path)
	chain := &Plan{Request: r, name: "xla_chain"}
	var out []Suggestion
	for _, j := range path {
		steps, err := xlaHopSteps(r, nodes[prev[j]].s, nodes[j].s)
		if err != nil {
			return nil, nil // unreachable: the hop was emulated above
		}
		chain.Steps = append(chain.Steps, steps...)
		if j == last {
			continue
		}
		s := nodes[j].s
		ps, _ := s.PartitionSpecText()
		out = append(out, Suggestion{Sharding: s, PartitionSpec: ps, Shardy: s.Text(r.Mesh.Name)})
	}
	chain.finishWith(b)
	chain.Summary.Strategy = XLA
	return out, chain
}

// sortSubAxes puts consecutive sub-axes of one axis inside a dim into major-to-minor
// order and merges them ("T:(2)2","T:(1)2" -> "T").
func sortSubAxes(s sharding.Sharding, m *sharding.Mesh) sharding.Sharding {
	c := s.Clone()
	for d := range c.Dims {
		ax := c.Dims[d].Axes
		for a := 0; a < len(ax); {
			b := a + 1
			for b < len(ax) && ax[b].Name == ax[a].Name {
				b++
			}
			slices.SortStableFunc(ax[a:b], func(x, y sharding.AxisRef) int { return x.Pre - y.Pre })
			a = b
		}
		c.Dims[d].Axes = sharding.MergeAdjacent(ax)
	}
	c.Canonicalize(m)
	return c
}
