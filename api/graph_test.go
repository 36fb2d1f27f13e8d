package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/propagation"
)

// apiGraph is API.md's /v1/graph example.
const apiGraph = `{
  "mesh": {"name": "mesh", "axes": [{"name": "data", "size": 2}, {"name": "model", "size": 4}]},
  "tensors": {
    "x": {"shape": [8, 16], "dtype": "bf16", "sharding": ["data", null]},
    "w": {"shape": [16, 32], "dtype": "bf16", "sharding": "[{}, {\"model\"}]"},
    "y": {"shape": [8, 32], "dtype": "bf16"}
  },
  "ops": [
    {"name": "mm", "op": "dot_general", "operands": ["x", "w"], "results": ["y"],
     "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}}
  ],
  "options": {"conflict_resolution": "aggressive", "op_priority": true},
  "cost_model": "h100", "strategy": "optimal",
  "policy": {"forbid_full_rematerialization": true}
}`

// tpGraph: a contraction over a sharded dim (a reduction, scattered onto y's dim 1)
// followed by a transpose whose result is annotated differently (a reshard).
const tpGraph = `{
  "mesh": "data=2,model=4",
  "tensors": {
    "x": {"shape": [8, 16], "dtype": "bf16", "sharding": ["data", "model"]},
    "w": {"shape": [16, 32], "dtype": "bf16", "sharding": ["model", null]},
    "y": {"shape": [8, 32], "dtype": "bf16", "sharding": ["data", "model"]},
    "z": {"shape": [32, 8], "dtype": "bf16", "sharding": [null, "data"]}
  },
  "ops": [
    {"name": "mm", "op": "dot_general", "operands": ["x", "w"], "results": ["y"],
     "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}},
    {"name": "t", "op": "transpose", "operands": ["y"], "results": ["z"], "attrs": {"permutation": [1, 0]}}
  ],
  "include": ["ops"]
}`

// remat: seed 003 case 4 as a sharding constraint; XLA rematerializes it.
const rematGraph = `{
  "mesh": "C=1,D=2,Y=8,X=4,T=4",
  "tensors": {
    "a": {"shape": [2048, 2048], "dtype": "f32", "sharding": ["D", ["X", "Y"]]},
    "b": {"shape": [2048, 2048], "dtype": "f32", "sharding": [null, ["D", "Y", "X", "T"]]}
  },
  "ops": [{"name": "constrain", "op": "sharding_constraint", "operands": ["a"], "results": ["b"]}]
  %s
}`

type graphBody struct {
	PlanID      string                  `json:"plan_id"`
	Shardings   map[string]ShardingJSON `json:"shardings"`
	Collectives []struct {
		OpName    string     `json:"op_name"`
		Tensor    string     `json:"tensor"`
		Kind      string     `json:"kind"`
		Reduction string     `json:"reduction"`
		MeshAxes  []string   `json:"mesh_axes"`
		Dim       *int       `json:"dim"`
		Plan      *GraphPlan `json:"plan"`
		Steps     []StepJSON `json:"steps"`
		TimeUS    float64    `json:"time_us"`
		Bytes     int64      `json:"bytes_per_device"`
		Remat     bool       `json:"full_rematerialization"`
	} `json:"collectives"`
	Summary GraphSummary              `json:"summary"`
	Explain map[string][]ExplainEntry `json:"explain"`
	Refined []string                  `json:"refined"`
	Ops     []OpShardingJSON          `json:"ops"`
	Stats   propagation.Stats         `json:"stats"`
}

func postGraph(t *testing.T, h http.Handler, body string) graphBody {
	t.Helper()
	rec := do(t, h, http.MethodPost, "/v1/graph", "application/json", body)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var g graphBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &g))
	return g
}

func dimAxes(s ShardingJSON) [][]string {
	out := make([][]string, len(s.Dims))
	for i, d := range s.Dims {
		out[i] = d.Axes
	}
	return out
}

func TestGraphAPIExample(t *testing.T) {
	s := newTestServer(t, nil)
	g := postGraph(t, s, apiGraph)
	assert.Len(t, g.PlanID, 64)
	assert.Equal(t, [][]string{{"data"}, {}}, dimAxes(g.Shardings["x"]))
	assert.Equal(t, [][]string{{}, {"model"}}, dimAxes(g.Shardings["w"]))
	assert.Equal(t, [][]string{{"data"}, {"model"}}, dimAxes(g.Shardings["y"]), "y takes i from x and j from w")
	assert.Equal(t, `sharding<@mesh, [{"data"}, {"model"}]>`, g.Shardings["y"].Text)
	assert.Empty(t, g.Collectives, "no operand moves and nothing contracted over a sharded dim")
	assert.Equal(t, GraphSummary{Strategy: "optimal", CostModel: "h100"}, g.Summary)
	require.Len(t, g.Explain["y"], 2)
	assert.Equal(t, ExplainEntry{Dim: 0, Axes: []string{"data"}, From: "x dim 0 through mm (factor i)"}, g.Explain["y"][0])
	assert.Equal(t, ExplainEntry{Dim: 1, Axes: []string{"model"}, From: "w dim 1 through mm (factor j)"}, g.Explain["y"][1])
	assert.Equal(t, []string{}, g.Refined, "x and w are closed: nothing refined")
	assert.Nil(t, g.Ops, "ops only when included")
}

func TestGraphReductionAndReshard(t *testing.T) {
	s := newTestServer(t, nil)
	g := postGraph(t, s, tpGraph)
	require.Len(t, g.Collectives, 2, "%+v", g.Collectives)

	red := g.Collectives[0]
	assert.Equal(t, "mm", red.OpName)
	assert.Equal(t, "y", red.Tensor)
	assert.Equal(t, kindReduction, red.Kind)
	assert.Equal(t, "reduce_scatter", red.Reduction, "y is sharded on model after the sum: reduce-scatter")
	assert.Equal(t, []string{"model"}, red.MeshAxes)
	require.NotNil(t, red.Dim)
	assert.Equal(t, 1, *red.Dim)
	require.Len(t, red.Steps, 1)
	assert.Equal(t, "reduce_scatter", red.Steps[0].Op)
	assert.Equal(t, []string{"model"}, red.Steps[0].Before.Unreduced)
	assert.Empty(t, red.Steps[0].After.Unreduced)
	assert.Equal(t, [][]string{{"data"}, {"model"}}, dimAxes(red.Steps[0].After))
	assert.Nil(t, red.Plan)

	rs := g.Collectives[1]
	assert.Equal(t, "t", rs.OpName)
	assert.Equal(t, "z", rs.Tensor)
	assert.Equal(t, kindReshard, rs.Kind)
	require.NotNil(t, rs.Plan)
	// transpose computes z as y's layout transposed, [model, data]; z is annotated [-, data].
	assert.Equal(t, [][]string{{"model"}, {"data"}}, dimAxes(rs.Plan.Source))
	assert.Equal(t, [][]string{{}, {"data"}}, dimAxes(rs.Plan.Target))
	requireChain(t, rs.Plan.Source, rs.Plan.Target, rs.Plan.Steps)
	assert.Equal(t, rs.Plan.Summary.TimeUS, rs.TimeUS)

	// The summary adds up the collectives.
	var sum float64
	var bytes int64
	for _, c := range g.Collectives {
		sum += c.TimeUS
		bytes += c.Bytes
	}
	assert.InDelta(t, sum, g.Summary.TimeUS, 1e-9)
	assert.Equal(t, bytes, g.Summary.BytesPerDevice)
	assert.Equal(t, 1, g.Summary.Reshards)
	assert.Equal(t, 1, g.Summary.Reductions)
	assert.Equal(t, 2, g.Summary.UniquePlans)
	assert.GreaterOrEqual(t, g.Summary.Collectives, 2)
	assert.False(t, g.Summary.FullRematerialization)

	require.Len(t, g.Ops, 2)
	assert.Equal(t, "mm", g.Ops[0].Name)
	assert.Equal(t, "([i, k], [k, j])->([i, j]) {i=8, j=32, k=16} reduction={k}", g.Ops[0].Rule)
	require.Len(t, g.Ops[0].Factors, 3)
	assert.Equal(t, FactorAxesJSON{Factor: "k", Size: 16, Type: "reduction", Axes: []string{"model"}}, g.Ops[0].Factors[2])
}

// requireChain checks API.md's rules of a plan: steps[0].before is the source, each
// after is the next before, the last after is the target.
func requireChain(t *testing.T, src, tgt ShardingJSON, steps []StepJSON) {
	t.Helper()
	cur := src.Text
	for i, st := range steps {
		require.Equal(t, cur, st.Before.Text, "step %d before", i)
		cur = st.After.Text
	}
	require.Equal(t, tgt.Text, cur, "last after is the target")
}

func TestGraphPolicy(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tc := range []struct {
		name, extra string
		status      int
	}{
		{"xla rematerializes: 422", `, "strategy": "xla", "policy": {"forbid_full_rematerialization": true}`, http.StatusUnprocessableEntity},
		{"xla without the policy: 200", `, "strategy": "xla"`, http.StatusOK},
		{"optimal avoids it: 200", `, "policy": {"forbid_full_rematerialization": true}`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Replace(rematGraph, "%s", tc.extra, 1)
			rec := do(t, s, http.MethodPost, "/v1/graph", "application/json", body)
			if tc.status == http.StatusOK {
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				var g graphBody
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &g))
				require.Len(t, g.Collectives, 1)
				assert.Equal(t, strings.Contains(tc.extra, "xla"), g.Summary.FullRematerialization)
				assert.Equal(t, g.Summary.FullRematerialization, g.Collectives[0].Remat)
				return
			}
			requireProblem(t, rec, tc.status, slugPolicyViolation)
			var p struct {
				Detail     string `json:"detail"`
				Violations []struct {
					Policy    string       `json:"policy"`
					OpName    string       `json:"op_name"`
					Tensor    string       `json:"tensor"`
					Message   string       `json:"message"`
					Suggested []Suggestion `json:"suggested_constraints"`
				} `json:"violations"`
				Plan graphBody `json:"plan"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
			assert.Contains(t, p.Detail, "constrain/a")
			require.Len(t, p.Violations, 1)
			v := p.Violations[0]
			assert.Equal(t, "forbid_full_rematerialization", v.Policy)
			assert.Equal(t, "constrain", v.OpName)
			assert.Equal(t, "a", v.Tensor)
			assert.Contains(t, v.Message, "{devices=[2,32,4]<=[2,8,4,4]T(0,2,1,3) last_tile_dim_replicate}")
			require.NotEmpty(t, v.Suggested)
			assert.Equal(t, "P('D', ('X','Y','T'))", v.Suggested[0].PartitionSpec)
			assert.True(t, p.Plan.Summary.FullRematerialization)
			assert.True(t, p.Plan.Summary.XLAFallback)
			require.Len(t, p.Plan.Collectives, 1)
			assert.Equal(t, int64(16515072), p.Plan.Collectives[0].Bytes, "XLA's 15.75 MiB")
		})
	}
}

// TestGraphFullRematerializationOption: the reshard of
// TestReshardFullRematerializationOption as a sharding constraint. Its fastest plan on
// tpu-v5p rematerializes: "allow" takes it, the default (and "avoid", the same plan id)
// the exchange.
func TestGraphFullRematerializationOption(t *testing.T) {
	s := newTestServer(t, nil)
	graph := func(extra string) string {
		return constraintGraph("a0=16,a1=16,a2=16,a3=16", "[30, 6, 31]",
			`[{\"a2\":(1)4}, {\"a2\":(4)4, \"a1\", \"a0\":(4)4}, {\"a3\"}]`,
			`[{\"a0\":(1)4}, {}, {\"a1\", \"a3\", \"a2\":(4)4}]`, extra)
	}
	def := postGraph(t, s, graph(""))
	avoid := postGraph(t, s, graph(`, "full_rematerialization": "avoid"`))
	allow := postGraph(t, s, graph(`, "full_rematerialization": "allow"`))
	assert.Equal(t, def.PlanID, avoid.PlanID)
	assert.NotEqual(t, def.PlanID, allow.PlanID)
	assert.False(t, def.Summary.FullRematerialization)
	assert.True(t, allow.Summary.FullRematerialization)
	assert.Less(t, allow.Summary.TimeUS, def.Summary.TimeUS)
}

// TestGraphEffortOption: the random-set reshard of TestReshardEffortOption as a sharding
// constraint: "fast" applies to it (a slower plan, a plan id of its own), "thorough" is
// the default.
func TestGraphEffortOption(t *testing.T) {
	s := newTestServer(t, nil)
	graph := func(extra string) string {
		return constraintGraph("a=2,b=2,c=4,d=4,e=4", "[256, 2048]",
			`[{\"c\"}, {\"e\":(2)2, \"b\", \"d\", \"a\", \"e\":(1)2}]`,
			`[{\"e\", \"c\"}, {\"b\", \"d\", \"a\"}]`, extra)
	}
	def := postGraph(t, s, graph(""))
	thorough := postGraph(t, s, graph(`, "effort": "thorough"`))
	fast := postGraph(t, s, graph(`, "effort": "fast"`))
	assert.Equal(t, def.PlanID, thorough.PlanID)
	assert.NotEqual(t, def.PlanID, fast.PlanID)
	assert.Greater(t, fast.Summary.TimeUS, def.Summary.TimeUS)
}

// constraintGraph is a graph body of one bf16 tensor a of shape (JSON) on mesh, with
// sharding src (escaped Shardy text), constrained to tgt as b, on tpu-v5p; extra adds
// top-level members (`, "effort": "fast"`).
func constraintGraph(mesh, shape, src, tgt, extra string) string {
	return `{"mesh": "` + mesh + `", "cost_model": "tpu-v5p",
	  "tensors": {
	    "a": {"shape": ` + shape + `, "dtype": "bf16", "sharding": "` + src + `"},
	    "b": {"shape": ` + shape + `, "dtype": "bf16", "sharding": "` + tgt + `"}
	  },
	  "ops": [{"name": "constrain", "op": "sharding_constraint", "operands": ["a"], "results": ["b"]}]` + extra + `}`
}

func TestGraphPlanIDIgnoresInputForm(t *testing.T) {
	s := newTestServer(t, nil)
	a := postGraph(t, s, apiGraph)
	// The same graph: mesh as a string, annotations in other forms, keys reordered.
	b := postGraph(t, s, `{
	  "cost_model": "h100",
	  "ops": [{"results": ["y"], "operands": ["x", "w"], "op": "dot_general", "name": "mm",
	     "attrs": {"rhs_contracting_dimensions": [0], "lhs_contracting_dimensions": [1]}}],
	  "tensors": {
	    "w": {"shape": [16, 32], "dtype": "bf16", "sharding": {"dims": [{"axes": []}, {"axes": ["model"]}]}},
	    "x": {"shape": [8, 16], "dtype": "bf16", "sharding": "[{\"data\"}, {}]"},
	    "y": {"shape": [8, 32], "dtype": "bf16"}
	  },
	  "mesh": "data=2,model=4",
	  "options": {"conflict_resolution": "aggressive"}
	}`)
	assert.Equal(t, a.PlanID, b.PlanID)
	// And as the frameworks print them: XLA's HloSharding, JAX's PartitionSpec text,
	// DTensor placements, NumPy/PyTorch dtype names.
	f := postGraph(t, s, `{
	  "mesh": {"name": "mesh", "axes": [{"name": "data", "size": 2}, {"name": "model", "size": 4}]},
	  "tensors": {
	    "x": {"shape": [8, 16], "dtype": "bfloat16", "sharding": "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
	    "w": {"shape": [16, 32], "dtype": "torch.bfloat16", "sharding": {"placements": ["Replicate()", "Shard(1)"]}},
	    "y": {"shape": [8, 32], "dtype": "jnp.bfloat16", "sharding": "P(P.UNCONSTRAINED, P.UNCONSTRAINED)"}
	  },
	  "ops": [{"name": "mm", "op": "dot_general", "operands": ["x", "w"], "results": ["y"],
	     "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}}],
	  "options": {"conflict_resolution": "aggressive", "op_priority": true},
	  "cost_model": "h100", "strategy": "optimal"
	}`)
	assert.Equal(t, a.Shardings, f.Shardings)
	assert.Equal(t, "{devices=[2,4]<=[8]}", f.Shardings["y"].Hlo)
	assert.Equal(t, "P('data', 'model')", f.Shardings["y"].PartitionSpec)
	c := postGraph(t, s, strings.Replace(apiGraph, `"h100"`, `"tpu-v5p"`, 1))
	assert.NotEqual(t, a.PlanID, c.PlanID, "another cost model is another plan")
	d := postGraph(t, s, strings.Replace(apiGraph, `"aggressive"`, `"basic"`, 1))
	assert.NotEqual(t, a.PlanID, d.PlanID, "another conflict resolution is another plan")
}

func TestGraphMemoized(t *testing.T) {
	memo := &fakeMemo{store: map[string][]byte{}}
	s := newTestServer(t, func(d *Deps) { d.Memo = memo })
	first := do(t, s, http.MethodPost, "/v1/graph", "application/json", tpGraph)
	require.Equal(t, http.StatusOK, first.Code)
	assert.Equal(t, "miss", first.Header().Get("X-Cache"))
	second := do(t, s, http.MethodPost, "/v1/graph", "application/json", tpGraph)
	require.Equal(t, http.StatusOK, second.Code)
	assert.Equal(t, "hit", second.Header().Get("X-Cache"))
	assert.Equal(t, first.Body.String(), second.Body.String())
}

func TestGraphBadInput(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxGraphOps = 3
	lim.MaxGraphTensors = 6
	lim.MaxGraphBodyBytes = 4096
	s := newTestServer(t, func(d *Deps) { d.Limits = lim })
	mm := func(attrs string) string {
		return `{"mesh": "x=2", "tensors": {"a": {"shape": [4, 8]}, "b": {"shape": [6, 4]}, "c": {"shape": [4, 4]}},
		  "ops": [{"name": "mm", "op": "dot_general", "operands": ["a", "b"], "results": ["c"], "attrs": ` + attrs + `}]}`
	}
	cases := []struct {
		name, body string
		status     int
		slug       string
		field      string
		detail     string
	}{
		{"unknown op lists the supported ops", `{"mesh": "x=2", "tensors": {"a": {"shape": [4]}, "b": {"shape": [4]}},
		  "ops": [{"name": "f", "op": "frobnicate", "operands": ["a"], "results": ["b"]}]}`, 400, slugInvalidGraph, "ops[0].op", "dot_general"},
		{"missing tensor", `{"mesh": "x=2", "tensors": {"a": {"shape": [4]}},
		  "ops": [{"name": "n", "op": "negate", "operands": ["a"], "results": ["nope"]}]}`, 400, slugInvalidGraph, "ops[0].results[0]", "nope"},
		{"contracting sizes differ", mm(`{"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}`), 400, slugInvalidGraph, "ops[0].attrs.rhs_contracting_dimensions[0]", "contracting sizes differ"},
		{"cycle", `{"mesh": "x=2", "tensors": {"a": {"shape": [4]}, "b": {"shape": [4]}},
		  "ops": [{"name": "f", "op": "negate", "operands": ["a"], "results": ["b"]}, {"name": "g", "op": "negate", "operands": ["b"], "results": ["a"]}]}`, 400, slugInvalidGraph, "ops[0]", "cycle"},
		{"bad annotation", `{"mesh": "x=2", "tensors": {"a": {"shape": [4], "sharding": ["q"]}}, "ops": []}`, 400, slugInvalidSharding, "tensors.a.sharding[0]", "unknown mesh axis"},
		{"bad mesh", `{"mesh": "x=0", "tensors": {}, "ops": []}`, 400, slugInvalidMesh, "mesh", ""},
		{"tensors required", `{"mesh": "x=2"}`, 400, slugInvalidRequest, "tensors", ""},
		{"unknown top-level field", `{"mesh": "x=2", "tensors": {}, "opz": []}`, 400, slugInvalidRequest, "", "opz"},
		{"bad strategy", `{"mesh": "x=2", "tensors": {}, "strategy": "fast"}`, 400, slugInvalidRequest, "strategy", ""},
		{"bad remat choice", `{"mesh": "x=2", "tensors": {}, "full_rematerialization": "sometimes"}`, 400, slugInvalidRequest, "full_rematerialization", ""},
		{"remat allowed and forbidden", `{"mesh": "x=2", "tensors": {}, "full_rematerialization": "allow", "policy": {"forbid_full_rematerialization": true}}`, 400, slugInvalidRequest, "full_rematerialization", "policy.forbid_full_rematerialization"},
		{"unknown effort", `{"mesh": "x=2", "tensors": {}, "effort": "quick"}`, 400, slugInvalidRequest, "effort", "fast"},
		{"bad cost model", `{"mesh": "x=2", "tensors": {}, "cost_model": "abacus"}`, 400, slugInvalidRequest, "cost_model", "abacus"},
		{"bad conflict resolution", `{"mesh": "x=2", "tensors": {}, "options": {"conflict_resolution": "polite"}}`, 400, slugInvalidRequest, "options.conflict_resolution", ""},
		{"too many ops", `{"mesh": "x=2", "tensors": {"a": {"shape": [4]}, "b": {"shape": [4]}, "c": {"shape": [4]}, "d": {"shape": [4]}, "e": {"shape": [4]}},
		  "ops": [{"name": "1", "op": "negate", "operands": ["a"], "results": ["b"]}, {"name": "2", "op": "negate", "operands": ["b"], "results": ["c"]},
		          {"name": "3", "op": "negate", "operands": ["c"], "results": ["d"]}, {"name": "4", "op": "negate", "operands": ["d"], "results": ["e"]}]}`, 400, slugLimitExceeded, "ops", "SHARDPLAN_MAX_GRAPH_OPS"},
		{"too many tensors", `{"mesh": "x=2", "tensors": {"a": {"shape": [4]}, "b": {"shape": [4]}, "c": {"shape": [4]}, "d": {"shape": [4]}, "e": {"shape": [4]}, "f": {"shape": [4]}, "g": {"shape": [4]}}}`, 400, slugLimitExceeded, "tensors", "SHARDPLAN_MAX_GRAPH_TENSORS"},
		{"rank over the limit", `{"mesh": "x=2", "tensors": {"a": {"shape": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}}}`, 400, slugLimitExceeded, "tensors.a.shape", "SHARDPLAN_MAX_RANK"},
		{"body over the graph limit", `{"mesh": "x=2", "tensors": {}, "ops": [], "outputs": ["` + strings.Repeat("a", 5000) + `"]}`, 413, slugBodyTooLarge, "", "SHARDPLAN_MAX_GRAPH_BODY_BYTES"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, "/v1/graph", "application/json", tc.body)
			p := requireProblem(t, rec, tc.status, tc.slug)
			if tc.field != "" {
				assert.Contains(t, fields(p), tc.field, rec.Body.String())
			}
			if tc.detail != "" {
				assert.Contains(t, rec.Body.String(), tc.detail)
			}
		})
	}
}
