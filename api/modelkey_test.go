package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// modelPairs are custom cost models that differ from modelBase in one field each. priced
// says the field changes the reshard's summary (time or model name); the others
// (links_per_chip is informational) must still get their own plan id.
var modelPairs = []struct {
	name, model string
	priced      bool
}{
	{"efficiency", `{"base":"h100","efficiency":0.5}`, true},
	{"name", `{"base":"h100","efficiency":0.9,"name":"lab"}`, true},
	{"nvlink bandwidth", `{"base":"h100","efficiency":0.9,"links":{"nvlink":{"bandwidth_gbps":100}}}`, true},
	{"nvlink latency", `{"base":"h100","efficiency":0.9,"links":{"nvlink":{"latency_us":40}}}`, true},
	{"nvlink base latency", `{"base":"h100","efficiency":0.9,"links":{"nvlink":{"base_latency_us":90}}}`, true},
	{"nvlink topology", `{"base":"h100","efficiency":0.9,"links":{"nvlink":{"topology":"line"}}}`, false},
	{"mode", `{"base":"h100","efficiency":0.9,"mode":"max"}`, true},
	{"gpus per node", `{"base":"h100","efficiency":0.9,"gpus_per_node":2}`, true},
	{"axis links", `{"base":"h100","efficiency":0.9,"axis_links":{"x":"ib"}}`, true},
	{"links per chip", `{"base":"h100","efficiency":0.9,"links":{"nvlink":{"links_per_chip":3}}}`, false},
}

const modelBase = `{"base":"h100","efficiency":0.9}`

// TestPlanKeysHoldTheWholeModel posts the same reshard and graph under models that differ
// in one field each: every pair gets its own plan id and its own answer, never the one
// memoized for the other; identical models written differently share one.
func TestPlanKeysHoldTheWholeModel(t *testing.T) {
	const reshard = `{"mesh":"x=2,y=4","shape":[1024,1024],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]],"cost_model":%s}`
	graph := strings.Replace(tpGraph, `"mesh": "data=2,model=4",`, `"mesh": "x=2,y=4", "cost_model": %s,`, 1)
	graph = strings.NewReplacer(`"data"`, `"x"`, `"model"`, `"y"`).Replace(graph)
	type answer struct {
		PlanID  string          `json:"plan_id"`
		Summary json.RawMessage `json:"summary"`
	}
	post := func(t *testing.T, s *Server, path, body string) (answer, string) {
		t.Helper()
		rec := do(t, s, http.MethodPost, path, "application/json", body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var a answer
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a))
		require.NotEmpty(t, a.PlanID)
		return a, rec.Header().Get("X-Cache")
	}
	for _, route := range []struct{ path, body string }{{"/v1/reshard", reshard}, {"/v1/graph", graph}} {
		for _, pair := range modelPairs {
			t.Run(route.path+"/"+pair.name, func(t *testing.T) {
				s := newTestServer(t, func(d *Deps) { d.Memo = &mapMemo{m: map[string][]byte{}} })
				base, _ := post(t, s, route.path, fmt.Sprintf(route.body, modelBase))
				other, cache := post(t, s, route.path, fmt.Sprintf(route.body, pair.model))
				assert.Equal(t, "miss", cache, "a model with other figures is not the memoized one")
				assert.NotEqual(t, base.PlanID, other.PlanID)
				if pair.priced && route.path == "/v1/reshard" {
					assert.NotEqual(t, string(base.Summary), string(other.Summary))
				}
				// The same model in another spelling: the same plan, from the memo.
				respelled := strings.Replace(pair.model, `"base":"h100",`, `"base":"h100-dgx", "sources":{"x":"y"}, `, 1)
				again, cache := post(t, s, route.path, fmt.Sprintf(route.body, respelled))
				assert.Equal(t, other.PlanID, again.PlanID)
				assert.Equal(t, "hit", cache)
			})
		}
	}
}

// TestFingerprint checks the fingerprint against the figures: one field changed changes
// it, the built-in profile and its figures given as a custom model share it.
func TestFingerprint(t *testing.T) {
	resolve := func(raw string) string {
		t.Helper()
		m, err := cost.Resolve(json.RawMessage(raw), "cost_model")
		require.NoError(t, err, raw)
		return modelFingerprint(m)
	}
	base := resolve(modelBase)
	seen := map[string]string{base: "base"}
	for _, pair := range modelPairs {
		fp := resolve(pair.model)
		prev, dup := seen[fp]
		assert.False(t, dup, "%s shares a fingerprint with %s", pair.name, prev)
		seen[fp] = pair.name
	}
	assert.Equal(t, resolve(`"h100"`), resolve(`{"base":"h100","description":"same figures"}`))
	assert.Equal(t, resolve(`"h100"`), resolve(`{"base":"h100","name":"h100"}`))
	assert.NotEqual(t, resolve(`"h100"`), resolve(`"h200"`))
}
