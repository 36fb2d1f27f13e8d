package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/openapi"
)

// schemaProperties are the property names of each definition in swagger.json and of
// each component schema in openapi3.json, by document and name.
func schemaProperties(t *testing.T) map[string]map[string]map[string]bool {
	t.Helper()
	type schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var v2 struct {
		Definitions map[string]schema `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(openapi.JSON, &v2))
	var v3 struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openapi.JSON3, &v3))
	out := map[string]map[string]map[string]bool{}
	for doc, defs := range map[string]map[string]schema{"swagger.json": v2.Definitions, "openapi3.json": v3.Components.Schemas} {
		out[doc] = map[string]map[string]bool{}
		for name, d := range defs {
			props := map[string]bool{}
			for k := range d.Properties {
				props[k] = true
			}
			out[doc][name] = props
		}
	}
	return out
}

// TestProblemSchemaCoversAnswers: every member of a real problem+json answer, the
// extension members included (more_errors, checks, violations, plan,
// suggested_constraints, min_budget_bytes_per_device), is a property of the published
// Problem schema, and every member of each violation a property of Violation.
func TestProblemSchemaCoversAnswers(t *testing.T) {
	s := newTestServer(t, nil)
	var unknown []string
	for i := range maxListedErrors + 3 {
		unknown = append(unknown, fmt.Sprintf(`"u%d": {"shape": [4], "sharding": [["nope"]]}`, i))
	}
	draining := newTestServer(t, nil)
	draining.SetDraining(true)
	cases := []struct {
		name   string
		h      http.Handler
		method string
		path   string
		body   string
		status int
		want   []string // members the answer must carry
	}{
		{"400 with more errors than listed", s, http.MethodPost, "/v1/graph", `{"mesh": "x=2", "tensors": {` + strings.Join(unknown, ",") + `}, "ops": []}`,
			http.StatusBadRequest, []string{"type", "title", "status", "detail", "instance", "errors", "more_errors"}},
		{"503 not ready", draining, http.MethodGet, "/readyz", "", http.StatusServiceUnavailable, []string{"checks"}},
		{"422 reshard policy violation", s, http.MethodPost, "/v1/reshard",
			strings.Replace(case4, "%s", `, "strategy": "xla", "policy": {"forbid_full_rematerialization": true}`, 1),
			http.StatusUnprocessableEntity, []string{"violations", "plan", "suggested_constraints"}},
		{"422 graph policy violation", s, http.MethodPost, "/v1/graph",
			strings.Replace(rematGraph, "%s", `, "strategy": "xla", "policy": {"forbid_full_rematerialization": true}`, 1),
			http.StatusUnprocessableEntity, []string{"violations", "plan"}},
		{"422 memory budget", s, http.MethodPost, "/v1/reshard",
			`{"mesh": "x=4", "shape": [64, 64], "dtype": "f32", "source": ["x", null], "target": [null, "x"], "memory_budget_bytes_per_device": 1}`,
			http.StatusUnprocessableEntity, []string{"min_budget_bytes_per_device"}},
	}
	props := schemaProperties(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, tc.h, tc.method, tc.path, "application/json", tc.body)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			require.Equal(t, ProblemContentType, rec.Header().Get("Content-Type"))
			var members map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &members))
			for _, k := range tc.want {
				require.Contains(t, members, k, rec.Body.String())
			}
			var violations []map[string]json.RawMessage
			if v, ok := members["violations"]; ok {
				require.NoError(t, json.Unmarshal(v, &violations))
				require.NotEmpty(t, violations)
			}
			for doc, defs := range props {
				require.NotNil(t, defs["Problem"], "%s defines no Problem", doc)
				require.NotNil(t, defs["Violation"], "%s defines no Violation", doc)
				for k := range members {
					assert.True(t, defs["Problem"][k], "%s: %q is not a property of Problem", doc, k)
				}
				for i, v := range violations {
					for k := range v {
						assert.True(t, defs["Violation"][k], "%s: violations[%d].%s is not a property of Violation", doc, i, k)
					}
				}
			}
		})
	}
}

// TestProblemEncoding: a problem's bytes. Without extension members they follow the
// field order; with any, every member's key is in sorted order, in one object.
func TestProblemEncoding(t *testing.T) {
	base := func() *Problem {
		return &Problem{Type: ProblemTypeBase + "x", Title: "T", Status: 422, Detail: "d <&>", Instance: "i"}
	}
	cases := []struct {
		name string
		p    func() *Problem
		want string
	}{
		{"standard members only", base,
			`{"type":"https://shardplan.dev/problems/x","title":"T","status":422,"detail":"d <&>","instance":"i"}`},
		{"field errors and more", func() *Problem {
			p := base()
			p.Errors = []FieldError{fieldErrorOf(sharding.Fieldf("a", "b"))}
			p.MoreErrors = 7
			return p
		}, `{"detail":"d <&>","errors":[{"field":"a","message":"b"}],"instance":"i","more_errors":7,"status":422,"title":"T","type":"https://shardplan.dev/problems/x"}`},
		{"checks", func() *Problem {
			p := base()
			p.Checks = map[string]string{"db": "down", "cache": "ok"}
			return p
		}, `{"checks":{"cache":"ok","db":"down"},"detail":"d <&>","instance":"i","status":422,"title":"T","type":"https://shardplan.dev/problems/x"}`},
		{"policy violation", func() *Problem {
			p := base()
			p.Violations = []Violation{{Policy: "forbid_full_rematerialization", OpName: "mm", Tensor: "y", Message: "m", SuggestedConstraints: json.RawMessage(`[{"partition_spec": "P('x')"}]`)}}
			p.Plan = json.RawMessage(`{"plan_id": "abc", "steps": []}`)
			p.SuggestedConstraints = json.RawMessage(`[]`)
			p.MinBudget = 5
			return p
		}, `{"detail":"d <&>","instance":"i","min_budget_bytes_per_device":5,"plan":{"plan_id":"abc","steps":[]},"status":422,"suggested_constraints":[],"title":"T","type":"https://shardplan.dev/problems/x","violations":[{"policy":"forbid_full_rematerialization","op_name":"mm","tensor":"y","message":"m","suggested_constraints":[{"partition_spec":"P('x')"}]}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := encodeJSON(tc.p())
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}
