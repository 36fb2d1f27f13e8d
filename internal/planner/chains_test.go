package planner

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The chain judge: a plan A -> C is beaten when a chain of the planner's own plans
// through intermediate shardings costs less. Intermediates are the structured
// neighbours of A (one slice, all-gather or all-to-all of a minor suffix away) and of C
// (the same moves undo each other, so these are C's predecessors too), over every
// mesh axis split into prime atoms. Chains of two (A -> X -> C) and three
// (A -> F -> B -> C, F a neighbour of A, B of C) are priced.

// chainReport is what the judge found for one reshard.
type chainReport struct {
	plan   *Plan
	chain  float64 // cheapest chain (+Inf: none counts)
	via    []sharding.Sharding
	legs   []*Plan // the cheapest chain's plans
	plans  int     // plans the judge made
	proven bool
}

// chainOptions set what judgeChainsOver prices: at most neighbours intermediates per
// end, over the mesh axes split into prime atoms while they number at most maxPrime (0:
// the units of the structured graph, whole axes or the sub-axes the ends name), and
// chains of three when threes. With defaultLegs the legs are planned at the default
// effort whatever the request's (an exhaustive plan judged by the answers a default
// request gets: exhaustive legs would take a planning budget each).
type chainOptions struct {
	neighbours, maxPrime int
	threes, defaultLegs  bool
}

// judgeChainsOver is judgeChains with its options.
func judgeChainsOver(t testing.TB, r *Request, opt chainOptions) chainReport {
	t.Helper()
	maxNeighbours := opt.neighbours
	plan := func(from, to sharding.Sharding) *Plan {
		q := *r
		q.Source, q.Target = from, to
		if opt.defaultLegs && (!from.SameLayout(r.Source) || !to.SameLayout(r.Target)) {
			q.Effort = EffortThorough
		}
		p, err := Reshard(context.Background(), &q)
		if err != nil {
			t.Fatalf("%s -> %s: %v", from, to, err)
		}
		return p
	}
	ac := plan(r.Source, r.Target)
	rep := chainReport{plan: ac, chain: math.Inf(1), plans: 1, proven: ac.Summary.Optimality == OptimalityProven}
	sp, ok := reqSpace(r, true, opt.maxPrime)
	if !ok {
		return rep
	}
	rng := rand.New(rand.NewPCG(uint64(len(r.Shape)), uint64(r.Mesh.NumDevices())))
	fwd := neighbourShardings(sp, sp.stateOf(r.Source), r, rng, maxNeighbours)
	bwd := neighbourShardings(sp, sp.stateOf(r.Target), r, rng, maxNeighbours)
	// counts: neither half rematerializes (nor is the intermediate replicated) where
	// A -> C does not.
	keepsRule := !ac.Summary.FullRematerialization
	noRep := !r.Source.IsFullyReplicated() && !r.Target.IsFullyReplicated()
	counts := func(ps ...*Plan) bool {
		for _, p := range ps {
			if keepsRule && p.Summary.FullRematerialization {
				return false
			}
		}
		return true
	}
	mid := func(s sharding.Sharding) bool { return !(keepsRule && noRep && s.IsFullyReplicated()) }
	consider := func(total float64, legs []*Plan, via ...sharding.Sharding) {
		if total < rep.chain {
			rep.chain, rep.via, rep.legs = total, via, legs
		}
	}
	fromA := map[string]*Plan{}
	for _, x := range slices.Concat(fwd, bwd) {
		if !mid(x) || x.SameLayout(r.Source) || x.SameLayout(r.Target) {
			continue
		}
		k := x.String()
		if _, ok := fromA[k]; ok {
			continue
		}
		ax, xc := plan(r.Source, x), plan(x, r.Target)
		rep.plans += 2
		fromA[k] = ax
		if counts(ax, xc) {
			consider(ax.Summary.TimeUS+xc.Summary.TimeUS, []*Plan{ax, xc}, x)
		}
	}
	for _, f := range fwd {
		if !opt.threes {
			break
		}
		af := fromA[f.String()]
		if af == nil || !counts(af) {
			continue
		}
		for _, b := range bwd {
			if !mid(b) || b.SameLayout(f) || b.SameLayout(r.Target) {
				continue
			}
			fb, bc := plan(f, b), plan(b, r.Target)
			rep.plans += 2
			if counts(fb, bc) {
				consider(af.Summary.TimeUS+fb.Summary.TimeUS+bc.Summary.TimeUS, []*Plan{af, fb, bc}, f, b)
			}
		}
	}
	return rep
}

// neighbourShardings lists the shardings one structured step from st (slices by one
// free atom, gathers and all-to-alls of every minor suffix), at most limit of them
// (a seeded sample when there are more).
func neighbourShardings(sp *space, st state, r *Request, rng *rand.Rand, limit int) []sharding.Sharding {
	var out []state
	used := st.used()
	for d := range st {
		for a := range sp.atoms {
			if used&(1<<a) == 0 {
				nx := st.clone()
				nx[d] = append(nx[d], uint8(a))
				out = append(out, nx)
			}
		}
		n := len(st[d])
		for j := 1; j <= n; j++ {
			nx := st.clone()
			nx[d] = nx[d][:n-j]
			out = append(out, nx)
			for b := range st {
				if b != d {
					nx := st.clone()
					nx[d] = nx[d][:n-j]
					nx[b] = append(nx[b], st[d][n-j:]...)
					out = append(out, nx)
				}
			}
		}
	}
	if len(out) > limit {
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		out = out[:limit]
	}
	shs := make([]sharding.Sharding, 0, len(out))
	for _, s := range out {
		sh := sp.sharding(s, r.Source.Unreduced)
		sh.Canonicalize(r.Mesh)
		shs = append(shs, sh)
	}
	return shs
}

// BenchmarkChainJudge runs the chain judge over the first cases of the random set
// (SHARDPLAN_CHAIN_CASES, default 20) and the two scale cases (d=4096 transposes) per
// profile, and reports how many plans a chain of the planner's own plans beats, by how
// much at worst, and the plans' time efficiency (lower bound over time), median and
// p10. SHARDPLAN_CHAIN_EFFORT=exhaustive plans the reshards judged with
// EffortExhaustive and their chains' legs at the default effort.
//
//	go test -run '^$' -bench BenchmarkChainJudge -benchtime 1x -timeout 30m ./internal/planner/
//	SHARDPLAN_CHAIN_EFFORT=exhaustive go test -run '^$' -bench BenchmarkChainJudge -benchtime 1x -timeout 60m ./internal/planner/
func BenchmarkChainJudge(b *testing.B) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("SHARDPLAN_CHAIN_CASES")); err == nil {
		n = v
	}
	set := randomSet(b)[:n]
	effort := Effort(os.Getenv("SHARDPLAN_CHAIN_EFFORT"))
	big := mustMesh(b, "d=4096")
	scale := []problem{
		{big, []int64{4096, 4096}, mustSharding(b, big, nil, `["d",null]`), mustSharding(b, big, nil, `[null,"d"]`)},
		{big, []int64{4096, 4096}, mustSharding(b, big, nil, `["d",null]`), mustSharding(b, big, nil, `["d:(1)64","d:(64)64"]`)},
	}
	for _, profile := range []string{"tpu-v5p", "h100"} {
		model, _ := cost.Profile(profile)
		b.Run(profile, func(b *testing.B) {
			for b.Loop() {
				beaten, proven, worst := 0, 0, 1.0
				var eff []float64
				for i, pb := range slices.Concat(set, scale) {
					r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: model, Effort: effort}
					rep := judgeChainsOver(b, r, chainOptions{neighbours: 12, maxPrime: completeMaxPrime, threes: true, defaultLegs: true})
					s := rep.plan.Summary
					eff = append(eff, s.TimeLowerBoundUS/math.Max(s.TimeUS, 1e-12))
					if rep.proven {
						proven++
					}
					if rep.chain < s.TimeUS*(1-1e-9)-1e-9 {
						beaten++
						worst = max(worst, s.TimeUS/rep.chain)
						if testing.Verbose() {
							b.Logf("case %d %v %s -> %s: %.2f µs, chain via %v %.2f µs\nplan:%s", i, pb.shape, pb.src, pb.tgt, s.TimeUS, rep.via, rep.chain, describeSteps(rep.plan))
							for _, leg := range rep.legs {
								b.Logf("  leg %.2f µs:%s", leg.Summary.TimeUS, describeSteps(leg))
							}
						}
					}
				}
				slices.Sort(eff)
				b.ReportMetric(float64(beaten), "beaten")
				b.ReportMetric(worst, "worst-x")
				b.ReportMetric(float64(proven), "proven")
				b.ReportMetric(eff[len(eff)/2], "eff-p50")
				b.ReportMetric(eff[len(eff)/10], "eff-p10")
			}
		})
	}
}
