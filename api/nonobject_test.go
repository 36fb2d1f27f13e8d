package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// bodyRoutes are the POST routes that take a JSON object body.
var bodyRoutes = []string{"/v1/reshard", "/v1/tiles", "/v1/graph", "/v1/audit", "/v1/transfer"}

// TestNonObjectBodies: a body that is one JSON value but not an object is a 400
// invalid-json saying what it is, on every route; a budget of 0 is a 400 naming the field.
func TestNonObjectBodies(t *testing.T) {
	s := newTestServer(t, nil)
	cases := []struct{ body, what string }{
		{"null", "null"},
		{" null\n", "null"},
		{"0", "number"},
		{"-1.5e3", "number"},
		{`"mesh"`, "string"},
		{"[]", "array"},
		{`[{"mesh": "x=2"}]`, "array"},
		{"true", "bool"},
	}
	for _, route := range bodyRoutes {
		for _, tc := range cases {
			t.Run(route+" "+tc.body, func(t *testing.T) {
				rec := do(t, s, http.MethodPost, route, "application/json", tc.body)
				p := requireProblem(t, rec, http.StatusBadRequest, slugInvalidJSON)
				assert.Contains(t, p.Detail, "must be a JSON object, not ")
				assert.Contains(t, p.Detail, tc.what)
			})
		}
	}
	budgets := []struct{ route, body string }{
		{"/v1/reshard", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": [null], "target": ["x"], "memory_budget_bytes_per_device": 0}`},
		{"/v1/audit", `{"mesh": "x=2", "tensors": {"a": {"shape": [4]}}, "ops": [], "inputs": ["a"], "outputs": ["a"], "memory_budget_bytes_per_device": 0}`},
	}
	for _, tc := range budgets {
		t.Run(tc.route+" budget 0", func(t *testing.T) {
			rec := do(t, s, http.MethodPost, tc.route, "application/json", tc.body)
			p := requireProblem(t, rec, http.StatusBadRequest, slugInvalidRequest)
			if assert.Len(t, p.Errors, 1) {
				assert.Equal(t, "memory_budget_bytes_per_device", p.Errors[0].Field)
			}
		})
	}
}

// FuzzNonObjectBodies posts JSON values of every kind to every body route: never a 5xx,
// and a body that is valid JSON but not an object is always a 400 invalid-json.
func FuzzNonObjectBodies(f *testing.F) {
	s := fuzzServer(f)
	for _, seed := range []string{"null", "0", "-0", "1e999", `"x"`, `""`, "[]", "[null]", "[[{}]]", "true", "false", `{}`, `{"mesh": null}`, "null null", " \t null"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		trimmed := bytes.TrimSpace([]byte(body))
		notObject := json.Valid(trimmed) && len(trimmed) > 0 && trimmed[0] != '{'
		for _, route := range bodyRoutes {
			rec := do(t, s, http.MethodPost, route, "application/json", body)
			switch {
			case rec.Code >= 500:
				t.Fatalf("%s: %d for %q: %s", route, rec.Code, body, rec.Body.String())
			case notObject && (rec.Code != http.StatusBadRequest || !bytes.Contains(rec.Body.Bytes(), []byte(slugInvalidJSON))):
				t.Fatalf("%s: %d for the non-object %q: %s", route, rec.Code, body, rec.Body.String())
			}
		}
	})
}
