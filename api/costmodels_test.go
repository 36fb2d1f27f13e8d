package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

func TestCostModelsListing(t *testing.T) {
	s := newTestServer(t, nil)
	rec := do(t, s, http.MethodGet, "/v1/cost-models", "", "")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var list CostModelList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	assert.Equal(t, cost.DefaultProfile, list.Default)
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
		assert.NotEmpty(t, m.Description, m.Name)
		assert.NotEmpty(t, m.Links, m.Name)
		for class, l := range m.Links {
			assert.Positive(t, l.BandwidthGBps, "%s %s", m.Name, class)
			assert.NotEmpty(t, l.Sources, "%s %s: every figure has a source", m.Name, class)
		}
	}
	// COSTMODEL.md's profiles, each listed once.
	assert.ElementsMatch(t, []string{"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "a100", "h100", "h200", "b200", "gb200-nvl72"}, names)
}

func TestCostModelByName(t *testing.T) {
	s := newTestServer(t, nil)
	for _, name := range []string{"h100", "h100-nvlink", "tpu-v5p"} {
		rec := do(t, s, http.MethodGet, "/v1/cost-models/"+name, "", "")
		require.Equal(t, http.StatusOK, rec.Code, name)
		var p cost.ProfileInfo
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		assert.Equal(t, strings.TrimSuffix(name, "-nvlink"), p.Name, "an alias answers with its profile")
	}
	var h100 cost.ProfileInfo
	require.NoError(t, json.Unmarshal(do(t, s, http.MethodGet, "/v1/cost-models/h100", "", "").Body.Bytes(), &h100))
	assert.Equal(t, 8, h100.GPUsPerNode)
	assert.Contains(t, h100.Links, "nvlink")
	assert.Contains(t, h100.Links, "ib")
	assert.Greater(t, h100.Links["nvlink"].BandwidthGBps, h100.Links["ib"].BandwidthGBps)

	rec := do(t, s, http.MethodGet, "/v1/cost-models/abacus", "", "")
	p := requireProblem(t, rec, http.StatusNotFound, slugNotFound)
	assert.Contains(t, p.Detail, "GET /v1/cost-models")
}

// A request's cost_model object (a base plus overrides) changes the plan's prices; a bad
// one is a 400 naming the field.
func TestReshardCostModelObject(t *testing.T) {
	s := newTestServer(t, nil)
	req := func(model string) string {
		return `{"mesh": "node=4,gpu=8", "shape": [4096, 4096], "dtype": "bf16", "source": ["gpu", null], "target": ["node", "gpu"], "cost_model": ` + model + `}`
	}
	base := postReshard(t, s, req(`"h100"`))
	// Mark every axis InfiniBand: nothing can stay on NVLink, and it costs more.
	allIB := postReshard(t, s, req(`{"base": "h100", "axis_links": {"node": "ib", "gpu": "ib"}}`))
	assert.Equal(t, "h100", base.Summary.CostModel)
	assert.NotEqual(t, base.PlanID, allIB.PlanID, "another model is another plan")
	for _, st := range allIB.Steps {
		if st.Link != "" {
			assert.Equal(t, "ib", st.Link)
		}
	}
	assert.Equal(t, "h100+custom", allIB.Summary.CostModel)
	assert.Less(t, base.Summary.TimeUS, allIB.Summary.TimeUS)

	for _, tc := range []struct{ model, field string }{
		{`{"base": "h100", "axis_links": {"gpu": "carrier-pigeon"}}`, "cost_model.axis_links.gpu"},
		{`{"base": "abacus"}`, "cost_model.base"},
		{`"abacus"`, "cost_model"},
		{`{"base": "h100", "efficiency": 2}`, "cost_model.efficiency"},
	} {
		rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", req(tc.model))
		p := requireProblem(t, rec, http.StatusBadRequest, slugInvalidRequest)
		assert.Contains(t, fields(p), tc.field, rec.Body.String())
	}
}
