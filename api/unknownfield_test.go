package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnknownFieldSuggests: a key no field takes is an invalid request (not malformed
// JSON) naming the key by its path and, when one is close, the field meant.
func TestUnknownFieldSuggests(t *testing.T) {
	s := newTestServer(t, nil)
	const reshard = `"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]`
	const graph = `"mesh":"x=2","tensors":{"a":{"shape":[4],"dtype":"f32","sharding":[["x"]]}},"ops":[]`
	tests := []struct {
		name, path, body string
		field            string
		suggests         string // "" when nothing is close
	}{
		{"a transposition", "/v1/reshard", `{` + reshard + `,"effrot":"fast"}`, "effrot", `did you mean "effort"?`},
		{"a missing letter", "/v1/reshard", `{` + reshard + `,"planing_budget_ms":100}`, "planing_budget_ms", `did you mean "planning_budget_ms"?`},
		{"another case and a typo", "/v1/reshard", `{` + reshard + `,"Alowed_ops":["all_gather"]}`, "Alowed_ops", `did you mean "allowed_ops"?`},
		{"nested", "/v1/reshard", `{` + reshard + `,"policy":{"forbid_full_remat":true}}`, "policy.forbid_full_remat", ""},
		{"nested typo", "/v1/reshard", `{` + reshard + `,"policy":{"forbid_full_rematerialisation":true}}`, "policy.forbid_full_rematerialisation", `did you mean "forbid_full_rematerialization"?`},
		{"nothing close", "/v1/reshard", `{` + reshard + `,"bogus":1}`, "bogus", ""},
		{"tiles", "/v1/tiles", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[["x"]],"devics":[0]}`, "devics", `did you mean "devices"?`},
		{"graph", "/v1/graph", `{` + graph + `,"strategi":"xla"}`, "strategi", `did you mean "strategy"?`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, tc.path, "application/json", tc.body)
			p := requireProblem(t, rec, http.StatusBadRequest, slugInvalidRequest)
			assert.Equal(t, "Invalid request", p.Title)
			require.Len(t, p.Errors, 1)
			assert.Equal(t, tc.field, p.Errors[0].Field)
			assert.Contains(t, p.Errors[0].Message, "unknown field")
			if tc.suggests == "" {
				assert.NotContains(t, p.Errors[0].Message, "did you mean")
			} else {
				assert.Contains(t, p.Errors[0].Message, tc.suggests)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"effort", "effort", 0},
		{"effrot", "effort", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"ca", "abc", 3},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, editDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.want, editDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}
