package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func postReshard(t *testing.T, h http.Handler, body string) ReshardResponse {
	t.Helper()
	rec := do(t, h, http.MethodPost, "/v1/reshard", "application/json", body)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var r ReshardResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	requireChain(t, r.Source, r.Target, r.Steps)
	return r
}

// TestReshardAPIExample is API.md's /v1/reshard example (seed 003 case 1): one slice and
// one collective_permute with XLA's pairs, at the lower bound.
func TestReshardAPIExample(t *testing.T) {
	s := newTestServer(t, nil)
	r := postReshard(t, s, `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32",
	  "source": ["X", null], "target": ["Y", "X"], "cost_model": "tpu-v5p", "include": ["tiles", "transfers", "diagram"]}`)
	// Routed, the exchange in which the four devices that hold their tile keep it and
	// the other four each take 2 MiB from a neighbour along X (one hop) beats XLA's
	// permute, whose pairs run up to three hops.
	require.Len(t, r.Steps, 1)
	ex := r.Steps[0]
	assert.Equal(t, "all_to_all_v", ex.Op)
	require.Len(t, ex.Transfers, 4)
	for _, tr := range ex.Transfers {
		assert.Equal(t, int64(2<<20), tr.Bytes)
		assert.Equal(t, 4, abs(tr.From-tr.To), "one hop along X: %+v", tr)
	}
	assert.Equal(t, int64(2<<20), ex.BytesPerDevice)
	assert.Equal(t, []int64{512, 1024}, ex.LocalShapeAfter)
	assert.Equal(t, "ici", ex.Link)
	assert.InDelta(t, 1.0, ex.LatencyUS, 1e-9, "one hop, one peer")
	assert.InDelta(t, ex.TimeUS, ex.LatencyUS+ex.BandwidthUS, 1e-9)
	assert.Equal(t, 1, r.Summary.Collectives)
	assert.Positive(t, r.Summary.TimeLowerBoundUS)
	assert.LessOrEqual(t, r.Summary.TimeLowerBoundUS, r.Summary.TimeUS)
	assert.Equal(t, int64(2<<20), r.Summary.LowerBoundBytesPerDevice)
	assert.Equal(t, 1.0, r.Summary.Efficiency)
	assert.False(t, r.Summary.FullRematerialization)
	assert.Equal(t, []Suggestion{}, r.SuggestedConstraints)
	require.NotNil(t, r.Tiles)
	assert.Len(t, r.Tiles.Source, 8)
	assert.NotEmpty(t, r.Transfers)
	assert.Contains(t, r.Diagram, "all_to_all_v")

	// Without all_to_all_v: XLA's plan, a slice and one permute with XLA's own pairs.
	x := postReshard(t, s, `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"],
	  "cost_model": "tpu-v5p", "allowed_ops": ["slice", "all_gather", "all_to_all", "collective_permute"]}`)
	require.Len(t, x.Steps, 2)
	assert.Equal(t, "slice", x.Steps[0].Op)
	assert.Equal(t, int64(0), x.Steps[0].BytesPerDevice)
	cp := x.Steps[1]
	assert.Equal(t, "collective_permute", cp.Op)
	assert.Equal(t, [][2]int{{0, 0}, {1, 4}, {2, 1}, {3, 5}, {4, 2}, {5, 6}, {6, 3}, {7, 7}}, cp.Pairs)
	assert.Equal(t, int64(2<<20), cp.BytesPerDevice)
	assert.Greater(t, x.Summary.TimeUS, r.Summary.TimeUS)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// seed 003 case 4: [D, (X, Y)] -> [-, (D, Y, X, T)] on 256 devices.
const case4 = `{"mesh": "C=1,D=2,Y=8,X=4,T=4", "shape": [2048, 2048], "dtype": "f32",
  "source": ["D", ["X", "Y"]], "target": [null, ["D", "Y", "X", "T"]]%s}`

func TestReshardPolicy(t *testing.T) {
	s := newTestServer(t, nil)
	t.Run("xla rematerializes: 422 with the plan and suggestions", func(t *testing.T) {
		rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json",
			strings.Replace(case4, "%s", `, "strategy": "xla", "policy": {"forbid_full_rematerialization": true}`, 1))
		requireProblem(t, rec, http.StatusUnprocessableEntity, slugPolicyViolation)
		var p struct {
			Violations []map[string]string `json:"violations"`
			Plan       ReshardResponse     `json:"plan"`
			Suggested  []Suggestion        `json:"suggested_constraints"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.Len(t, p.Violations, 1)
		assert.Equal(t, "forbid_full_rematerialization", p.Violations[0]["policy"])
		assert.Contains(t, p.Violations[0]["message"], "Involuntary full rematerialization")
		assert.True(t, p.Plan.Summary.FullRematerialization)
		assert.Equal(t, int64(15.75*(1<<20)), p.Plan.Summary.BytesPerDevice)
		assert.Equal(t, "{devices=[2,32,4]<=[2,8,4,4]T(0,2,1,3) last_tile_dim_replicate}", p.Plan.SourceHlo)
		require.NotEmpty(t, p.Suggested)
		assert.Equal(t, "P('D', ('X','Y','T'))", p.Suggested[0].PartitionSpec)
		assert.Equal(t, p.Suggested, p.Plan.SuggestedConstraints)
	})
	t.Run("optimal passes the same gate", func(t *testing.T) {
		r := postReshard(t, s, strings.Replace(case4, "%s", `, "policy": {"forbid_full_rematerialization": true}`, 1))
		assert.False(t, r.Summary.FullRematerialization)
		// 256 KiB in three collectives: four times the 64 KiB bound in bytes, yet faster
		// than the one exchange that moves only those (its routes are long).
		assert.LessOrEqual(t, r.Summary.BytesPerDevice, int64(256<<10))
		assert.Less(t, r.Summary.TimeUS, 20.0)
		assert.Greater(t, r.Summary.TimeLowerBoundUS, 0.0)
		assert.LessOrEqual(t, r.Summary.TimeLowerBoundUS, r.Summary.TimeUS)
		assert.InDelta(t, r.Summary.TimeLowerBoundUS/r.Summary.TimeUS, r.Summary.TimeEfficiency, 1e-12)
	})
	t.Run("xla without the policy answers 200", func(t *testing.T) {
		r := postReshard(t, s, strings.Replace(case4, "%s", `, "strategy": "xla"`, 1))
		assert.True(t, r.Summary.FullRematerialization)
		assert.True(t, r.Summary.XLAFallback)
		assert.NotEmpty(t, r.XLAWarning)
	})
	t.Run("fallback within device groups also fires", func(t *testing.T) {
		body := `{"mesh": "w=2,p=2,q=2,r=2", "shape": [4, 8, 8, 8], "dtype": "f32",
		  "source": ["w", "p", null, ["q", "r"]], "target": ["w", null, ["p", "q", "r"], null], "strategy": "xla"%s}`
		r := postReshard(t, s, strings.Replace(body, "%s", "", 1))
		assert.False(t, r.Summary.FullRematerialization, "every intermediate stays sharded on w")
		assert.True(t, r.Summary.XLAFallback)
		assert.Contains(t, r.XLAPath, "group_equal_dims")
		rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", strings.Replace(body, "%s", `, "policy": {"forbid_full_rematerialization": true}`, 1))
		p := requireProblem(t, rec, http.StatusUnprocessableEntity, slugPolicyViolation)
		assert.Contains(t, p.Detail, "within device groups")
	})
}

func TestReshardTextDiagram(t *testing.T) {
	s := newTestServer(t, nil)
	req := `{"mesh": "x=2,y=2", "shape": [4, 4], "dtype": "f32", "source": ["x", "y"], "target": ["y", "x"]}`
	rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", req)
	require.Equal(t, http.StatusOK, rec.Code)
	var r ReshardResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	assert.Empty(t, r.Diagram, "the diagram only when asked for")

	hreq := strings.NewReader(req)
	httpReq, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/reshard", hreq)
	require.NoError(t, err)
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "text/plain")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httpReq)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"))
	assert.Contains(t, w.Body.String(), "collective_permute")
}

func TestReshardBadInput(t *testing.T) {
	s := newTestServer(t, nil)
	cases := []struct {
		name, body, slug, field string
	}{
		{"unknown axis", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["q"], "target": [null]}`, slugInvalidSharding, "source[0]"},
		{"rank mismatch", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["x", null], "target": [null]}`, slugInvalidSharding, "source"},
		{"axis used twice", `{"mesh": "x=2,y=2", "shape": [4, 4], "dtype": "f32", "source": {"dims": [{"axes": ["x"]}, {"axes": ["x"]}]}, "target": [null, null]}`, slugInvalidSharding, "source.dims[1].axes[0]"},
		{"text offset", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": "[{\"x\"", "target": [null]}`, slugInvalidSharding, "source"},
		{"no plan with allowed ops", `{"mesh": "x=2,y=2", "shape": [4, 4], "dtype": "f32", "source": ["x", "y"], "target": ["y", "x"], "allowed_ops": ["slice"]}`, slugInvalidRequest, "allowed_ops"},
		{"unknown op name", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": [null], "target": [null], "allowed_ops": ["teleport"]}`, slugInvalidRequest, "allowed_ops[0]"},
		{"mesh name mismatch", `{"mesh": {"name": "m", "axes": [{"name": "x", "size": 2}]}, "shape": [4], "dtype": "f32", "source": "sharding<@other, [{\"x\"}]>", "target": [null]}`, slugInvalidSharding, "source"},
		{"target creates partial sums", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": [null], "target": {"dims": [{"axes": []}], "unreduced": ["x"]}, "strategy": "xla"}`, slugInvalidSharding, "target.unreduced[0]"},
		{"unknown remat choice", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["x"], "target": [null], "full_rematerialization": "sometimes"}`, slugInvalidRequest, "full_rematerialization"},
		{"remat allowed and forbidden", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["x"], "target": [null], "full_rematerialization": "allow", "policy": {"forbid_full_rematerialization": true}}`, slugInvalidRequest, "full_rematerialization"},
		{"unknown effort", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["x"], "target": [null], "effort": "quick"}`, slugInvalidRequest, "effort"},
		{"negative planning budget", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["x"], "target": [null], "planning_budget_ms": -5}`, slugInvalidRequest, "planning_budget_ms"},
		{"planning budget above its limit", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["x"], "target": [null], "planning_budget_ms": 600001}`, slugInvalidRequest, "planning_budget_ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", tc.body)
			p := requireProblem(t, rec, http.StatusBadRequest, tc.slug)
			assert.Contains(t, fields(p), tc.field, rec.Body.String())
		})
	}
}

// A byte-identical request is answered from the exact-request entry in the media type it
// was asked in; the JSON and text/plain answers to the same body are separate entries.
func TestReshardExactHitKeepsMediaType(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Memo = &fakeMemo{store: map[string][]byte{}} })
	body := `{"mesh": "x=2,y=2", "shape": [4, 4], "dtype": "f32", "source": ["x", "y"], "target": ["y", "x"]}`
	post := func(accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/reshard", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec
	}
	jsonMiss := post("")
	assert.Equal(t, "miss", jsonMiss.Header().Get("X-Cache"))
	textFirst := post("text/plain")
	assert.Equal(t, "text/plain; charset=utf-8", textFirst.Header().Get("Content-Type"))
	textHit := post("text/plain")
	assert.Equal(t, "hit", textHit.Header().Get("X-Cache"))
	assert.Equal(t, "text/plain; charset=utf-8", textHit.Header().Get("Content-Type"))
	assert.Equal(t, textFirst.Body.String(), textHit.Body.String())
	jsonHit := post("")
	assert.Equal(t, "hit", jsonHit.Header().Get("X-Cache"))
	assert.Equal(t, "application/json", jsonHit.Header().Get("Content-Type"))
	assert.Equal(t, jsonMiss.Body.String(), jsonHit.Body.String())
}

// TestCompactLists: above SHARDPLAN_LIST_DEVICE_LIMIT a step's pairs and transfers come
// as runs that expand to exactly the explicit lists include ["pairs"] returns.
func TestCompactLists(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		limit      int
	}{
		// 1 M transfers in 2,046 runs (each receiver's list breaks at its own tile).
		{"all_to_all_v on 1,024 devices", `{"mesh":"d=1024","shape":[1024,1024],"dtype":"bf16","source":["d",null],"target":[null,"d"],"allowed_ops":["all_to_all_v"]%s}`, 256},
		{"collective_permute on 256 devices", `{"mesh":"a=16,b=16","shape":[1024,1024],"dtype":"f32","source":[["a","b"],null],"target":[["b","a"],null],"allowed_ops":["collective_permute"]%s}`, 64},
	} {
		s := newTestServer(t, func(d *Deps) { d.Limits.ListDeviceLimit = tc.limit })
		t.Run(tc.name, func(t *testing.T) {
			r := postReshard(t, s, fmt.Sprintf(tc.body, ""))
			// On 1,024 devices two exchanges over sub-axes may beat one among every
			// device: every step's runs are checked.
			require.NotEmpty(t, r.Steps)
			st := r.Steps[0]
			assert.False(t, r.ListsOmitted)
			assert.Empty(t, st.Pairs)
			assert.Empty(t, st.Transfers)
			if st.Op == "collective_permute" {
				require.NotEmpty(t, st.PairRuns)
				assert.LessOrEqual(t, len(st.PairRuns), 64)
				var got [][2]int
				for _, run := range st.PairRuns {
					got = append(got, run.Expand()...)
				}
				full := postReshard(t, s, fmt.Sprintf(tc.body, `,"include":["pairs"]`))
				assert.ElementsMatch(t, full.Steps[0].Pairs, got)
				return
			}
			full := postReshard(t, s, fmt.Sprintf(tc.body, `,"include":["pairs"]`))
			require.Len(t, full.Steps, len(r.Steps))
			for i, st := range r.Steps {
				require.Equal(t, "all_to_all_v", st.Op)
				require.NotEmpty(t, st.TransferRuns, "step %d", i)
				n := 0
				for _, run := range st.TransferRuns {
					n += run.Count
				}
				assert.Equal(t, len(full.Steps[i].Transfers), n, "step %d: every transfer, in %d runs", i, len(st.TransferRuns))
				assert.Less(t, len(st.TransferRuns), n, "step %d: runs are shorter than the list", i)
			}
		})
	}
}

// TestReshardFullRematerializationOption: on a 65,536-device reshard whose plans without
// a full rematerialization are all slower than gather-then-slice on tpu-v5p (the
// planner's TestAllowFullRematPicksTheFastest), the default answers the exchange and
// "allow" the fastest plan, which rematerializes; "avoid" is the default (same plan id),
// and "allow" is a plan id of its own.
func TestReshardFullRematerializationOption(t *testing.T) {
	s := newTestServer(t, nil)
	body := func(opt string) string {
		return `{"mesh": "a0=16,a1=16,a2=16,a3=16", "shape": [30, 6, 31], "dtype": "bf16", "cost_model": "tpu-v5p",
			"source": "[{\"a2\":(1)4}, {\"a2\":(4)4, \"a1\", \"a0\":(4)4}, {\"a3\"}]",
			"target": "[{\"a0\":(1)4}, {}, {\"a1\", \"a3\", \"a2\":(4)4}]"` + opt + `}`
	}
	def := postReshard(t, s, body(""))
	avoid := postReshard(t, s, body(`, "full_rematerialization": "avoid"`))
	allow := postReshard(t, s, body(`, "full_rematerialization": "allow"`))
	assert.False(t, def.Summary.FullRematerialization)
	assert.Equal(t, def.PlanID, avoid.PlanID)
	assert.NotEqual(t, def.PlanID, allow.PlanID)
	require.True(t, allow.Summary.FullRematerialization)
	assert.Less(t, allow.Summary.TimeUS, def.Summary.TimeUS)
	for _, c := range allow.Summary.Candidates {
		assert.GreaterOrEqual(t, c.TimeUS, allow.Summary.TimeUS*(1-1e-9), c.Name)
	}
}

// effortReshard is reshard 2 of testgen.RandomSet, whose fast plan (no
// anytime pass) is slower than the thorough one on tpu-v5p.
const effortReshard = `"mesh": "a=2,b=2,c=4,d=4,e=4", "shape": [256, 2048], "dtype": "bf16", "cost_model": "tpu-v5p",
	"source": "[{\"c\"}, {\"e\":(2)2, \"b\", \"d\", \"a\", \"e\":(1)2}]",
	"target": "[{\"e\", \"c\"}, {\"b\", \"d\", \"a\"}]"`

// TestReshardEffortOption: "thorough" is the default (the same plan id); "fast" is a
// plan id of its own, and on this reshard a slower plan from fewer expansions.
func TestReshardEffortOption(t *testing.T) {
	s := newTestServer(t, nil)
	def := postReshard(t, s, `{`+effortReshard+`}`)
	thorough := postReshard(t, s, `{`+effortReshard+`, "effort": "thorough"}`)
	fast := postReshard(t, s, `{`+effortReshard+`, "effort": "fast"}`)
	assert.Equal(t, def.PlanID, thorough.PlanID)
	assert.NotEqual(t, def.PlanID, fast.PlanID)
	assert.Greater(t, fast.Summary.TimeUS, def.Summary.TimeUS)
	assert.Less(t, fast.Summary.SearchExpansions, def.Summary.SearchExpansions)
}

// TestReshardExhaustiveEffort: effort exhaustive with a generous planning budget
// proves the 24-device rank-3 reshard the default effort answers best_found, no slower;
// the effort and the budget are each part of the plan id.
func TestReshardExhaustiveEffort(t *testing.T) {
	s := newTestServer(t, nil)
	const body = `"mesh": "x=4,y=3,z=2", "shape": [96, 1024, 24], "dtype": "f32", "cost_model": "tpu-v5p",
		"source": [["z"], ["y"], ["x"]], "target": [[], ["z", "x"], ["y"]]`
	def := postReshard(t, s, `{`+body+`}`)
	ex := postReshard(t, s, `{`+body+`, "effort": "exhaustive", "planning_budget_ms": 600000}`)
	budget := postReshard(t, s, `{`+body+`, "planning_budget_ms": 600000}`)
	assert.Equal(t, "proven", ex.Summary.Optimality)
	assert.LessOrEqual(t, ex.Summary.TimeUS, def.Summary.TimeUS*(1+1e-9))
	assert.NotEqual(t, def.PlanID, ex.PlanID)
	assert.NotEqual(t, def.PlanID, budget.PlanID)
	assert.NotEqual(t, ex.PlanID, budget.PlanID)
}

// TestExchangeListsItsHolders: an all_to_all_v the planner prices with the nearest
// holders (planner.Step.NearestHolders: cheaper there than spreading the senders across
// an axis) lists those holders' transfers, explicitly and as runs, never the spread
// ones it did not price.
func TestExchangeListsItsHolders(t *testing.T) {
	const body = `{"mesh":"a=2,b=2,c=4,d=4,e=4","shape":[1024,96],"dtype":"bf16","source":[["c","e"],"b"],"target":[null,["d","a","e","c"]],"cost_model":"tpu-v5p"}`
	m, err := sharding.ParseMeshString("a=2,b=2,c=4,d=4,e=4", "mesh")
	require.NoError(t, err)
	shape := []int64{1024, 96}
	for _, limit := range []int{1024, 16} {
		s := newTestServer(t, func(d *Deps) { d.Limits.ListDeviceLimit = limit })
		r := postReshard(t, s, body)
		i := slices.IndexFunc(r.Steps, func(st StepJSON) bool { return st.Op == "all_to_all_v" })
		require.GreaterOrEqual(t, i, 0)
		st := r.Steps[i]
		parse := func(sj ShardingJSON) sharding.Sharding {
			b, err := json.Marshal(sj)
			require.NoError(t, err)
			sh, err := sharding.Parse(b, m, shape, "s")
			require.NoError(t, err, string(b))
			return sh
		}
		before, after := parse(st.Before), parse(st.After)
		nearest := transfersOf(planner.Transfers(m, shape, 16, before, after, true))
		spread := transfersOf(planner.Transfers(m, shape, 16, before, after, false))
		require.NotEqual(t, spread, nearest, "the two holder choices differ here")
		require.Empty(t, st.Transfers, "list limit %d: runs, shorter than the list", limit)
		require.NotEmpty(t, st.TransferRuns)
		assert.ElementsMatch(t, nearest, stepTransfers(st), "list limit %d", limit)

		full := postReshard(t, s, strings.Replace(body, `}`, `,"include":["pairs"]}`, 1))
		st = full.Steps[i]
		require.Empty(t, st.TransferRuns, "include pairs: the list")
		assert.ElementsMatch(t, nearest, st.Transfers, "list limit %d, include pairs", limit)
	}
}

// stepTransfers is a step's transfers: its list, or its runs expanded.
func stepTransfers(st StepJSON) []Transfer {
	out := slices.Clone(st.Transfers)
	for _, run := range st.TransferRuns {
		out = append(out, run.Expand()...)
	}
	return out
}
