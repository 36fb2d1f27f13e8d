package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// budgetGraph is a graph of one reshard on two devices; extra adds top-level members.
func budgetGraph(extra string) string {
	return constraintGraph("x=2", "[8, 4]", `[{\"x\"}, {}]`, `[{}, {\"x\"}]`, extra)
}

// TestGraphEffortAndBudgetAccepted: the graph and audit routes take every effort and
// planning budget the reshard route takes.
func TestGraphEffortAndBudgetAccepted(t *testing.T) {
	s := newTestServer(t, nil)
	for _, extra := range []string{
		`, "effort": "thorough"`, `, "effort": "fast"`, `, "effort": "exhaustive"`, `, "effort": null`,
		`, "planning_budget_ms": 1`, `, "planning_budget_ms": 600000`, `, "planning_budget_ms": null`,
		`, "effort": "exhaustive", "planning_budget_ms": 50`, `, "strategy": "xla", "effort": "exhaustive", "planning_budget_ms": 50`,
	} {
		t.Run(extra, func(t *testing.T) {
			for _, path := range []string{"/v1/graph", "/v1/audit"} {
				rec := do(t, s, http.MethodPost, path, "application/json", budgetGraph(extra))
				assert.Equal(t, http.StatusOK, rec.Code, "%s: %s", path, rec.Body.String())
			}
		})
	}
}

// TestGraphEffortAndBudgetRejected: a bad effort or budget is a 400 naming the field,
// worded as the reshard route words it.
func TestGraphEffortAndBudgetRejected(t *testing.T) {
	s := newTestServer(t, nil)
	const reshard = `{"mesh": "x=2", "shape": [8, 4], "dtype": "bf16", "source": ["x", null], "target": [null, "x"]`
	cases := []struct {
		name, member, field, slug string
	}{
		{"unknown effort", `"effort": "quick"`, "effort", slugInvalidRequest},
		{"effort in capitals", `"effort": "EXHAUSTIVE"`, "effort", slugInvalidRequest},
		{"effort not a string", `"effort": 3`, "effort", slugInvalidJSON},
		{"negative budget", `"planning_budget_ms": -5`, "planning_budget_ms", slugInvalidRequest},
		{"budget above its limit", `"planning_budget_ms": 600001`, "planning_budget_ms", slugInvalidRequest},
		{"fractional budget", `"planning_budget_ms": 1.5`, "planning_budget_ms", slugInvalidJSON},
		{"budget as a string", `"planning_budget_ms": "100"`, "planning_budget_ms", slugInvalidJSON},
		{"budget as a boolean", `"planning_budget_ms": true`, "planning_budget_ms", slugInvalidJSON},
		{"budget out of int range", `"planning_budget_ms": 99999999999999999999`, "planning_budget_ms", slugInvalidJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := do(t, s, http.MethodPost, "/v1/reshard", "application/json", reshard+`, `+tc.member+`}`)
			wp := requireProblem(t, want, http.StatusBadRequest, tc.slug)
			for _, path := range []string{"/v1/graph", "/v1/audit"} {
				rec := do(t, s, http.MethodPost, path, "application/json", budgetGraph(`, `+tc.member))
				require.Equal(t, http.StatusBadRequest, rec.Code, "%s: %s", path, rec.Body.String())
				p := requireProblem(t, rec, http.StatusBadRequest, tc.slug)
				assert.Equal(t, wp.Type, p.Type, path)
				assert.Equal(t, wp.Detail, p.Detail, path)
				assert.Equal(t, wp.Errors, p.Errors, path)
				assert.Contains(t, fields(p), tc.field, path)
			}
		})
	}
}

// TestGraphPlanIDByEffortAndBudget: the effort and the budget are part of the graph's
// plan id (strategy optimal); thorough is the default, and strategy xla ignores both.
func TestGraphPlanIDByEffortAndBudget(t *testing.T) {
	s := newTestServer(t, nil)
	id := func(extra string) string { return postGraph(t, s, budgetGraph(extra)).PlanID }
	distinct := map[string]string{}
	for _, extra := range []string{
		"", `, "effort": "fast"`, `, "effort": "exhaustive"`, `, "planning_budget_ms": 50`, `, "planning_budget_ms": 60`,
		`, "effort": "exhaustive", "planning_budget_ms": 50`, `, "effort": "fast", "planning_budget_ms": 50`,
	} {
		got := id(extra)
		if prev, ok := distinct[got]; ok {
			t.Errorf("%q and %q share plan id %s", prev, extra, got)
		}
		distinct[got] = extra
	}
	assert.Equal(t, id(""), id(`, "effort": "thorough"`))
	assert.Equal(t, id(`, "planning_budget_ms": 50`), id(`, "effort": "thorough", "planning_budget_ms": 50`))
	xla := id(`, "strategy": "xla"`)
	assert.Equal(t, xla, id(`, "strategy": "xla", "effort": "exhaustive", "planning_budget_ms": 50`))
}

// TestGraphExhaustiveEffort: a graph of two distinct reshards (the 24-device rank-3
// reshard TestReshardExhaustiveEffort proves, and its way back) at effort exhaustive
// with a generous budget answers every plan proven or best_found, none slower than the
// default effort's.
func TestGraphExhaustiveEffort(t *testing.T) {
	s := newTestServer(t, nil)
	graph := func(extra string) string {
		return `{"mesh": "x=4,y=3,z=2", "cost_model": "tpu-v5p",
		  "tensors": {
		    "a": {"shape": [96, 1024, 24], "sharding": [["z"], ["y"], ["x"]]},
		    "b": {"shape": [96, 1024, 24], "sharding": [[], ["z", "x"], ["y"]]},
		    "c": {"shape": [96, 1024, 24], "sharding": [["z"], ["y"], ["x"]]}
		  },
		  "ops": [{"name": "there", "op": "sharding_constraint", "operands": ["a"], "results": ["b"]},
		          {"name": "back", "op": "sharding_constraint", "operands": ["b"], "results": ["c"]}]` + extra + `}`
	}
	def := postGraph(t, s, graph(""))
	ex := postGraph(t, s, graph(`, "effort": "exhaustive", "planning_budget_ms": 600000`))
	require.Len(t, ex.Collectives, 2)
	assert.Equal(t, 2, ex.Summary.UniquePlans)
	for i, c := range ex.Collectives {
		require.NotNil(t, c.Plan, i)
		assert.Contains(t, []string{"proven", "best_found"}, c.Plan.Summary.Optimality, i)
		assert.LessOrEqual(t, c.TimeUS, def.Collectives[i].TimeUS*(1+1e-9), i)
	}
	assert.NotEqual(t, def.PlanID, ex.PlanID)
}

// TestGraphXLAIgnoresEffortAndBudget: under strategy xla the effort and the budget
// change nothing, the reductions (planned the optimal way) included: the answer is the
// default's, byte for byte, as its plan id says.
func TestGraphXLAIgnoresEffortAndBudget(t *testing.T) {
	withStrategy := strings.Replace(tpGraph, `"include": ["ops"]`, `"include": ["ops"], "strategy": "xla"`, 1)
	require.NotEqual(t, tpGraph, withStrategy)
	answer := func(body string) string {
		rec := do(t, newTestServer(t, nil), http.MethodPost, "/v1/graph", "application/json", body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec.Body.String()
	}
	def := answer(withStrategy)
	require.Contains(t, def, `"kind":"reduction"`)
	for _, extra := range []string{`, "effort": "fast"`, `, "effort": "exhaustive", "planning_budget_ms": 1`} {
		assert.Equal(t, def, answer(strings.Replace(withStrategy, `"strategy": "xla"`, `"strategy": "xla"`+extra, 1)), extra)
	}
}
