package graphplan_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/api"
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/graphplan"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Megatron's MLP on data=2,model=4: the second matmul contracts the model-sharded
// dim, so its result holds partial sums: one all_reduce, planned without HTTP; the
// same graph twice over (two layers) plans that reduction once.
const mlp = `{
  "tensors": {
    "x":  {"shape": [8, 16], "dtype": "bf16", "sharding": ["data", null]},
    "w1": {"shape": [16, 64], "dtype": "bf16", "sharding": [null, "model"]},
    "h":  {"shape": [8, 64], "dtype": "bf16"},
    "w2": {"shape": [64, 16], "dtype": "bf16", "sharding": ["model", null]},
    "y":  {"shape": [8, 16], "dtype": "bf16", "sharding": ["data", null]},
    "w3": {"shape": [16, 64], "dtype": "bf16", "sharding": [null, "model"]},
    "h2": {"shape": [8, 64], "dtype": "bf16"},
    "w4": {"shape": [64, 16], "dtype": "bf16", "sharding": ["model", null]},
    "z":  {"shape": [8, 16], "dtype": "bf16", "sharding": ["data", null]}
  },
  "ops": [
    {"name": "up", "op": "dot_general", "operands": ["x", "w1"], "results": ["h"], "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}},
    {"name": "down", "op": "dot_general", "operands": ["h", "w2"], "results": ["y"], "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}},
    {"name": "up2", "op": "dot_general", "operands": ["y", "w3"], "results": ["h2"], "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}},
    {"name": "down2", "op": "dot_general", "operands": ["h2", "w4"], "results": ["z"], "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}}
  ],
  "inputs": ["x", "w1", "w2", "w3", "w4"], "outputs": ["z"]
}`

func TestPlanMLP(t *testing.T) {
	m, err := sharding.ParseMeshString("data=2,model=4", "mesh")
	require.NoError(t, err)
	g, opts, err := api.DecodeGraph([]byte(mlp), m)
	require.NoError(t, err)
	model, _ := cost.Profile("tpu-v5p")
	for _, strategy := range []planner.Strategy{planner.Optimal, planner.XLA} {
		res, err := graphplan.Plan(context.Background(), &graphplan.Request{Graph: g, Mesh: m, Options: opts, Strategy: strategy, Model: model})
		require.NoError(t, err, strategy)
		require.Len(t, res.Collectives, 2, "one reduction per layer")
		for i, c := range res.Collectives {
			assert.Equal(t, graphplan.KindReduction, c.Kind)
			assert.Equal(t, propagation.AllReduce, c.Reduction)
			assert.Equal(t, []string{"down", "down2"}[i], c.Op, "in op order")
			assert.Equal(t, "model", c.Axes[0].Name)
			require.NotNil(t, c.Plan)
			assert.Equal(t, planner.OpAllReduce, c.Plan.Steps[0].Op)
			assert.Nil(t, c.XLA, "reductions are planned optimally under both strategies")
		}
		s := res.Summary
		assert.Equal(t, 1, s.UniquePlans, "the two layers' reductions are one problem")
		assert.Equal(t, 2, s.Reductions)
		assert.Zero(t, s.Reshards)
		assert.InDelta(t, 2*res.Collectives[0].Plan.Summary.TimeUS, s.TimeUS, 1e-9)
		assert.False(t, s.FullRematerialization)
	}
}

// A sharding constraint that replicates a sharded tensor: one reshard, planned between
// the shardings propagation gives its two sides, ending at the constraint's.
func TestPlanReshard(t *testing.T) {
	m, err := sharding.ParseMeshString("x=4", "mesh")
	require.NoError(t, err)
	g, opts, err := api.DecodeGraph([]byte(`{
	  "tensors": {"a": {"shape": [8], "dtype": "f32", "sharding": ["x"]}, "b": {"shape": [8], "dtype": "f32", "sharding": [null]}},
	  "ops": [{"name": "c", "op": "sharding_constraint", "operands": ["a"], "results": ["b"]}],
	  "inputs": ["a"], "outputs": ["b"]}`), m)
	require.NoError(t, err)
	model, _ := cost.Profile("tpu-v5p")
	res, err := graphplan.Plan(context.Background(), &graphplan.Request{Graph: g, Mesh: m, Options: opts, Strategy: planner.Optimal, Model: model})
	require.NoError(t, err)
	require.Len(t, res.Collectives, 1)
	c := res.Collectives[0]
	assert.Equal(t, graphplan.KindReshard, c.Kind)
	assert.Equal(t, "c", c.Op)
	require.NotEmpty(t, c.Plan.Steps)
	assert.Equal(t, planner.OpAllGather, c.Plan.Steps[0].Op)
	assert.True(t, c.Plan.Steps[len(c.Plan.Steps)-1].After.SameLayout(c.To))
	assert.True(t, c.To.IsFullyReplicated())
	assert.Equal(t, 1, res.Summary.Reshards)
}
