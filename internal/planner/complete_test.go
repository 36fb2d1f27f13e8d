package planner

import (
	"context"
	"testing"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reshards where a plan that never replicates the tensor beats a single exchange or a
// rematerialization, on tpu-v5p: each plan costs what the oracle says, is proven, and
// is cheaper than the answers the planner gave without its complete pass.
func TestCompletePassFindsCheaperPlans(t *testing.T) {
	tpu, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	restricted := []Op{OpSlice, OpAllGather, OpAllToAll}
	cases := []struct {
		name     string
		mesh     string
		shape    []int64
		bits     int
		src, tgt string
		ops      []Op
		maxTime  float64 // µs: the cheaper plan's time
		wantOps  []Op
	}{
		{"seed 000 [[0],[1,2]]->[[0],[2]]: gather then slice", "x=2,y=2,z=2", []int64{4, 8}, 8, `[[0],[1,2]]`, `[[0],[2]]`, nil, 2.0, []Op{OpAllGather, OpSlice}},
		{"the same without point-to-point ops", "x=2,y=2,z=2", []int64{4, 8}, 8, `[[0],[1,2]]`, `[[0],[2]]`, restricted, 2.0, []Op{OpAllGather, OpSlice}},
		{"6x6 transpose on 2x3: gather, all-to-all, slice", "x=2,y=3", []int64{6, 6}, 8, `[[0],[1]]`, `[[1],[0]]`, nil, 3.0, []Op{OpAllGather, OpAllToAll, OpSlice}},
		{"uneven [x,y]->[x]: halo exchange, then gather", "x=2,y=2", []int64{6}, 32, `[["x","y"]]`, `["x"]`, nil, 3.0, []Op{OpCollectivePermute, OpAllGather}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMesh(t, tc.mesh)
			r := &Request{Mesh: m, Shape: tc.shape, ElemBits: tc.bits, Source: mustSharding(t, m, tc.shape, tc.src), Target: mustSharding(t, m, tc.shape, tc.tgt), Model: tpu, AllowedOps: tc.ops}
			want, wantRemat, _, _ := oracleBest(t, r)
			p, err := Reshard(context.Background(), r)
			require.NoError(t, err)
			t.Log(describeSteps(p))
			replay(t, p)
			assert.InDelta(t, tc.maxTime, p.Summary.TimeUS, 0.01)
			assert.InDelta(t, want, p.Summary.TimeUS, 1e-9*want)
			assert.False(t, wantRemat)
			assert.False(t, p.Summary.FullRematerialization)
			assert.Equal(t, OptimalityProven, p.Summary.Optimality)
			assert.Equal(t, tc.wantOps, ops(p))
		})
	}
}

// A budget below every plan's peak is refused with the smallest budget that admits
// one; that budget admits a plan whose peak is exactly it.
func TestMemoryBudget(t *testing.T) {
	tpu, _ := cost.Profile("tpu-v5p")
	m := mustMesh(t, "x=2,y=4")
	shape := []int64{64, 64}
	req := func(budget int64, ops []Op) *Request {
		return &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: mustSharding(t, m, shape, `[["x"],["y"]]`), Target: mustSharding(t, m, shape, `[["y"],["x"]]`),
			Model: tpu, MemoryBudget: budget, AllowedOps: ops}
	}
	tile := int64(64 / 2 * 64 / 4 * 4) // both ends: 2 KiB
	// With an exchange allowed, the ends' tiles are enough.
	p, err := Reshard(context.Background(), req(tile, nil))
	require.NoError(t, err)
	assert.LessOrEqual(t, p.Summary.PeakBytesPerDevice, tile)
	replay(t, p)
	// Gathers and slices only: every plan passes through a bigger tile.
	restricted := []Op{OpSlice, OpAllGather}
	_, err = Reshard(context.Background(), req(tile, restricted))
	var be *BudgetError
	require.ErrorAs(t, err, &be)
	require.Greater(t, be.MinBudget, tile)
	p, err = Reshard(context.Background(), req(be.MinBudget, restricted))
	require.NoError(t, err)
	assert.Equal(t, be.MinBudget, p.Summary.PeakBytesPerDevice)
	replay(t, p)
	// One byte less admits none.
	_, err = Reshard(context.Background(), req(be.MinBudget-1, restricted))
	require.ErrorAs(t, err, &be)
	// No budget: the fastest plan, whatever its peak.
	free, err := Reshard(context.Background(), req(0, restricted))
	require.NoError(t, err)
	assert.LessOrEqual(t, free.Summary.TimeUS, p.Summary.TimeUS+1e-9)
}

// A request whose context is done stops the complete pass within 64 steps of its queue
// (here a pass that would expand hundreds of states and route thousands of exchanges).
func TestCompletePassStopsAtItsDeadline(t *testing.T) {
	tpu, _ := cost.Profile("tpu-v5p")
	m := mustMesh(t, "a=8,b=4")
	shape := []int64{32}
	r := &Request{Mesh: m, Shape: shape, ElemBits: 32, Source: mustSharding(t, m, shape, `{"dims":[{"axes":["a"]}],"unreduced":["b:(1)2"]}`),
		Target: mustSharding(t, m, shape, `["b:(2)2"]`), Model: tpu}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := completePass(ctx, r, nil, 0)
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = completePass(context.Background(), r, nil, 0)
	require.NoError(t, err)
}

// Above its exhaustive size the complete pass searches the hierarchical family. On
// 4,096 h100 GPUs a transpose by one exchange among every device is latency-bound
// (2,465.9 µs). Two exchanges over 64-device sub-axes, through [d:(64)64, d:(1)64],
// cost 93.9 µs; where the best plan is latency-bound and far above the lower bound the
// pass chains exchanges through several states one structured step from the target: an
// all-to-all over 8 devices, then exchanges over 256 and 16, 56.7 µs.
func TestLargeMeshChainedExchanges(t *testing.T) {
	h100 := formulaModel(t, "h100")
	m := mustMesh(t, "d=4096")
	shape := []int64{4096, 4096}
	r := &Request{Mesh: m, Shape: shape, ElemBits: 16, Source: mustSharding(t, m, shape, `["d",null]`), Target: mustSharding(t, m, shape, `[null,"d"]`), Model: h100}
	p, err := Reshard(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, OptimalityBestFound, p.Summary.Optimality)
	assert.False(t, p.Summary.FullRematerialization)
	assert.LessOrEqual(t, p.Summary.TimeUS, 56.67, describeSteps(p))
	var direct float64
	for _, c := range p.Summary.Candidates {
		if c.Name == string(OpAllToAllV) {
			direct = c.TimeUS
		}
	}
	assert.Greater(t, direct, 40*p.Summary.TimeUS, "the rounds beat the one exchange")
	for _, op := range ops(p) {
		assert.Contains(t, []Op{OpAllToAll, OpAllToAllV}, op, describeSteps(p))
	}
	replay(t, p)
}

// Keep targets: random-set reshard 19 on tpu-v5p, [{e:(2)2}, {a}, {c:(2)2, c:(1)2}] ->
// [{}, {e, d}, {}] on a=2,b=2,c=4,d=4,e=4. Exchanging to the target and gathering dim 2
// costs 76.9 µs; slicing by the free atom b first, exchanging to the target with dim 2's
// free atoms kept (a, c, b) and gathering them in one all_gather over more axes costs
// 43.6 µs: the exchange moves less and the gather runs on more links.
func TestKeepTargetsGatherOverMoreAxes(t *testing.T) {
	tpu, _ := cost.Profile("tpu-v5p")
	pb := randomSet(t)[19]
	r := &Request{Mesh: pb.mesh, Shape: pb.shape, ElemBits: 16, Source: pb.src, Target: pb.tgt, Model: tpu}
	p, err := Reshard(context.Background(), r)
	require.NoError(t, err)
	replay(t, p)
	assert.LessOrEqual(t, p.Summary.TimeUS, 43.58+0.005, describeSteps(p))
	// Both the complete pass and the chain candidate reach keep targets; the chain
	// candidate, before the passes, finds it first.
	assert.True(t, p.kind == kindComplete || p.name == "chain", "%s: %s", p.name, describeSteps(p))
	require.Equal(t, []Op{OpSlice, OpAllToAllV, OpAllGather}, ops(p), describeSteps(p))
	gather := p.Steps[2]
	assert.Greater(t, len(gather.MeshAxes), 2, "the gather runs over the kept atoms and the target's free ones: %s", describeSteps(p))
	for _, c := range p.Summary.Candidates {
		if !c.Chosen && c.Name != "complete" {
			assert.Greater(t, c.TimeUS, 1.5*p.Summary.TimeUS, "%s", c.Name)
		}
	}
}

// completePass runs the complete pass against cands (the candidates so far): a plan
// strictly cheaper than the best of them under the request's rules (nil: none), and
// whether the answer (that plan, or the best candidate) is proven optimal.
//
// Once ctx is done it returns ctx's error: the routers pricing its steps stop then, and
// what they priced is meaningless.
func completePass(ctx context.Context, r *Request, cands []*Plan, lowerBound float64) (_ *Plan, _ bool, err error) {
	defer func() {
		if err == nil {
			err = ctx.Err()
		}
	}()
	cp, ok := passSpace(r)
	if !ok {
		return nil, false, nil
	}
	defer cp.releaseRouter()
	return completePassOn(ctx, r, cp, cands, lowerBound)
}
