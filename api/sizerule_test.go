package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOneSizeRule posts tensors over the element limit on every path: each is a 400
// naming the tensor's shape (a graph tensor of 2^62 x 4 elements answered 200 with 0
// bytes). A lowered SHARDPLAN_MAX_ELEMENTS applies to all of them alike.
func TestOneSizeRule(t *testing.T) {
	const huge = `[4611686018427387904, 4]`
	tests := []struct {
		name, path, ct, body, field string
		limit                       int64 // Limits.MaxElements (0: the default)
	}{
		{"graph tensor overflowing int64 bytes", "/v1/graph", "application/json",
			`{"mesh":"x=2","tensors":{"a":{"shape":` + huge + `,"dtype":"f32","sharding":[["x"],null]},"b":{"shape":[8,4],"dtype":"f32"}},"ops":[]}`, "tensors.a.shape", 0},
		{"graph tensor of 2^83 elements", "/v1/graph", "application/json",
			`{"mesh":"x=2","tensors":{"a":{"shape":[8,1099511627776,1099511627776],"dtype":"f32"},"b":{"shape":[8,1099511627776,1099511627776],"dtype":"f32"}},
			  "ops":[{"name":"n","op":"negate","operands":["a"],"results":["b"]}]}`, "tensors.a.shape", 0},
		{"module value over the limit", "/v1/graph?mesh=x%3D2", mlirMediaType,
			`func.func @main(%arg0: tensor<1099511627776x1099511627776xf32>) -> tensor<1099511627776x1099511627776xf32> { return %arg0 : tensor<1099511627776x1099511627776xf32> }`, "tensors.arg0.shape", 0},
		{"module dims of 2^41 x 2^20 (a dim above 2^40 made the value opaque)", "/v1/graph?mesh=x%3D2", mlirMediaType,
			`func.func @main(%arg0: tensor<2199023255552x1048576xf32>) -> tensor<2199023255552x1048576xf32> { return %arg0 : tensor<2199023255552x1048576xf32> }`, "tensors.arg0.shape", 0},
		{"module dim past int64", "/v1/graph?mesh=x%3D2", mlirMediaType,
			`func.func @main(%arg0: tensor<99999999999999999999xf32>) -> tensor<99999999999999999999xf32> { return %arg0 : tensor<99999999999999999999xf32> }`, "tensors.arg0.shape", 0},
		{"reshard over a lowered limit", "/v1/reshard", "application/json",
			`{"mesh":"x=2","shape":[1024,1024],"dtype":"f32","source":[["x"],null],"target":[null,null]}`, "shape", 1 << 16},
		{"tiles over a lowered limit", "/v1/tiles", "application/json",
			`{"mesh":"x=2","shape":[1024,1024],"dtype":"f32","sharding":[["x"],null]}`, "shape", 1 << 16},
		{"graph over a lowered limit", "/v1/graph", "application/json",
			`{"mesh":"x=2","tensors":{"a":{"shape":[1024,1024],"dtype":"f32"}},"ops":[]}`, "tensors.a.shape", 1 << 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, func(d *Deps) {
				if tc.limit > 0 {
					d.Limits.MaxElements = tc.limit
				}
			})
			rec := do(t, s, http.MethodPost, tc.path, tc.ct, tc.body)
			p := requireProblem(t, rec, http.StatusBadRequest, slugLimitExceeded)
			require.Equal(t, []string{tc.field}, fields(p))
			assert.Contains(t, p.Errors[0].Message, "SHARDPLAN_MAX_ELEMENTS")
		})
	}
	// Within the limit, and a graph tensor with a dim of 0 (no elements), are planned.
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxElements = 1 << 16 })
	rec := do(t, s, http.MethodPost, "/v1/graph", "application/json", `{"mesh":"x=2","tensors":{"a":{"shape":[256,256],"dtype":"f32"},"z":{"shape":[0,4],"dtype":"f32"}},"ops":[]}`)
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}
