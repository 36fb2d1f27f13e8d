package api

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fitBody is a POST /v1/cost-models/fit body over the dataset files named.
func fitBody(t *testing.T, base string, files ...string) string {
	t.Helper()
	req := FitRequest{Base: json.RawMessage(base)}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "internal", "cost", "testdata", "nccl", f))
		require.NoError(t, err)
		req.Outputs = append(req.Outputs, FitOutput{Name: f, Text: string(b)})
	}
	out, err := json.Marshal(req)
	require.NoError(t, err)
	return string(out)
}

// One cluster's nccl-tests outputs (one H100 node and ten nodes of eight, every
// collective) fit a model that prices its own points of 1 MiB and more closer than the
// base does: within 5% per collective on the node's geometric mean, within 10% across
// nodes, where the cluster's own figures are not smooth (its 10x8 all_gather takes 2.1x
// as long at 256 MiB as at 128 MiB, then 1.37x at 512 MiB: no curve that grows with
// size fits both within 5%). The fitted model is a cost_model every route takes, and it
// changes a plan's price.
func TestFitCostModel(t *testing.T) {
	s := newTestServer(t, nil)
	files := []string{
		"xxrjun-h100-1x8-allreduce.txt", "xxrjun-h100-1x8-allgather.txt", "xxrjun-h100-1x8-reducescatter.txt",
		"xxrjun-h100-1x8-alltoall.txt", "xxrjun-h100-10x8-allreduce.txt", "xxrjun-h100-10x8-allgather.txt",
		"xxrjun-h100-10x8-reducescatter.txt",
	}
	rec := do(t, s, http.MethodPost, "/v1/cost-models/fit", "application/json", fitBody(t, `"h100"`, files...))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var ans FitResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ans))
	require.NotEmpty(t, ans.Points)
	require.NotEmpty(t, ans.Groups)
	var fitLog, baseLog float64
	n := 0
	for _, p := range ans.Points {
		assert.Positive(t, p.MeasuredUS, p.Source)
		assert.Positive(t, p.PredictedUS, p.Source)
		assert.InDelta(t, p.PredictedUS/p.MeasuredUS-1, p.Error, 1e-9, p.Source)
		assert.Equal(t, p.Bytes >= 1<<20, p.Fitted, p.Source)
		assert.True(t, strings.HasPrefix(p.Source, "xxrjun-h100-"), p.Source)
		if p.Fitted {
			fitLog += math.Abs(math.Log1p(p.Error))
			baseLog += math.Abs(math.Log1p(p.BaseError))
			n++
		}
	}
	require.Positive(t, n)
	assert.Less(t, fitLog, baseLog, "the fit prices its own points closer than the base")
	scopes := map[string]bool{}
	for _, g := range ans.Groups {
		scopes[g.Scope] = true
		limit := 0.05
		if g.Scope != "node" {
			limit = 0.10
		}
		assert.LessOrEqual(t, g.GeomeanError, limit, "%s/%s: geomean error %.3f (base %.3f)", g.Collective, g.Scope, g.GeomeanError, g.BaseGeomeanError)
		assert.LessOrEqual(t, g.GeomeanError, g.BaseGeomeanError+1e-9, "%s/%s: the fit is no worse than the base", g.Collective, g.Scope)
		assert.LessOrEqual(t, g.GeomeanError, g.WorstError+1e-12)
	}
	assert.Equal(t, map[string]bool{"node": true, "nodes": true}, scopes)
	for _, o := range ans.Outliers {
		assert.Greater(t, math.Abs(o.Error), 0.25, o.Source)
	}

	// The fitted model is a cost_model: a plan priced on it differs from the base's.
	var model map[string]any
	require.NoError(t, json.Unmarshal(ans.CostModel, &model))
	assert.Equal(t, "h100-fitted", model["name"])
	reshard := func(cm string) ReshardResponse {
		return postReshard(t, s, `{"mesh": "x=16", "shape": [8192, 8192], "dtype": "bf16", "source": ["x", null], "target": [null, null], "cost_model": `+cm+`}`)
	}
	base, fitted := reshard(`"h100"`), reshard(string(ans.CostModel))
	assert.NotEqual(t, base.PlanID, fitted.PlanID)
	assert.NotEqual(t, base.Summary.TimeUS, fitted.Summary.TimeUS)
	assert.Equal(t, "h100-fitted", fitted.Summary.CostModel)
}

// What a fit cannot read is a 400 naming the field (and the line, for an output).
func TestFitCostModelBadInput(t *testing.T) {
	s := newTestServer(t, nil)
	good := fitBody(t, `"h100"`, "xxrjun-h100-1x8-allreduce.txt")
	var req FitRequest
	require.NoError(t, json.Unmarshal([]byte(good), &req))
	with := func(mod func(*FitRequest)) string {
		r := req
		r.Outputs = append([]FitOutput(nil), req.Outputs...)
		mod(&r)
		b, err := json.Marshal(r)
		require.NoError(t, err)
		return string(b)
	}
	cases := []struct {
		name, body, field, detail string
	}{
		{"tpu base", with(func(r *FitRequest) { r.Base = json.RawMessage(`"tpu-v5p"`) }), "base", "GPU profile"},
		{"unknown base", with(func(r *FitRequest) { r.Base = json.RawMessage(`"abacus"`) }), "base", ""},
		{"garbage line", with(func(r *FitRequest) {
			r.Outputs[0].Text = strings.Replace(r.Outputs[0].Text, "182.87", "18x.87", 1)
		}), "outputs[0].text", "line 32"},
		{"no rows", with(func(r *FitRequest) { r.Outputs[0].Text = "# nothing here\n" }), "outputs[0].text", ""},
		{"unknown collective", with(func(r *FitRequest) { r.Outputs[0].Collective = "broadcast_twice" }), "outputs[0].collective", "unknown collective"},
		{"more nodes than ranks", with(func(r *FitRequest) { r.Outputs[0].Ranks, r.Outputs[0].Nodes = 4, 8 }), "outputs[0].nodes", ""},
		{"no outputs", `{"base": "h100", "outputs": []}`, "outputs", ""},
		{"too many ranks", with(func(r *FitRequest) { r.Outputs[0].Ranks = 70000 }), "outputs[0].ranks", ""},
		{"no base", `{"outputs": [{"text": "x"}]}`, "base", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, "/v1/cost-models/fit", "application/json", c.body)
			p := requireProblem(t, rec, http.StatusBadRequest, slugInvalidRequest)
			assert.Contains(t, fields(p), c.field, rec.Body.String())
			assert.Contains(t, rec.Body.String(), c.detail)
		})
	}
}
