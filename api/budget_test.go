package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// amplifying is a request that amplifies: 146 bytes that ask for 1,048,576 transfers
// (268 MB of answer) on a=32,b=32, and 16 times that on a=64,b=64.
const amplifying = `{"mesh":"a=%d,b=%d","shape":[1024,1024],"dtype":"f32","source":[["a","b"],null],"target":[null,["a","b"]],"include":["transfers"]}`

func TestResponseBudget(t *testing.T) {
	tests := []struct {
		name   string
		limit  int64
		body   string
		field  string // "" means: 200
		quotes string // the problem names what would be listed
	}{
		{"amplifying 32x32", 0, fmt.Sprintf(amplifying, 32, 32), "include[0]", "1048576 transfers"},
		{"amplifying 64x64", 0, fmt.Sprintf(amplifying, 64, 64), "include[0]", "transfers"},
		{"transfers within the default", 0, `{"mesh":"x=2,y=4","shape":[64,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]],"include":["transfers"]}`, "", ""},
		{"tiles over a small limit", 2048, `{"mesh":"x=8,y=8","shape":[64,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]],"include":["diagram","tiles"]}`, "include[1]", "128 device tiles"},
		{"step pairs over a small limit", 256, `{"mesh":"x=8,y=8","shape":[64,64],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`, "steps", "collective_permute pairs"},
		{"no lists, no charge", 256, `{"mesh":"x=8,y=8","shape":[64,64],"dtype":"f32","source":[["x"],["y"]],"target":[["x"],null],"allowed_ops":["all_gather"]}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, func(d *Deps) {
				if tc.limit > 0 {
					d.Limits.MaxResponseBytes = tc.limit
				}
			})
			rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", tc.body)
			if tc.field == "" {
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				return
			}
			p := requireProblem(t, rec, http.StatusUnprocessableEntity, slugResponseTooLarge)
			require.Equal(t, []string{tc.field}, fields(p), p.Detail)
			msg := p.Errors[0].Message
			assert.Contains(t, msg, "SHARDPLAN_MAX_RESPONSE_BYTES")
			assert.Contains(t, msg, tc.quotes)
			assert.Contains(t, msg, "; ", "says how to ask for less")
			assert.Less(t, rec.Body.Len(), 4096, "the refusal itself is small")
		})
	}
}

func TestResponseBudgetGraph(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxResponseBytes = 256 })
	body := `{"mesh":"x=8,y=8","tensors":{"a":{"shape":[64,64],"sharding":[["x"],["y"]]},"b":{"shape":[64,64],"sharding":[["y"],["x"]]}},
	  "ops":[{"name":"c","op":"copy","operands":["a"],"results":["b"]}]}`
	rec := do(t, s, http.MethodPost, "/v1/graph", "application/json", body)
	if rec.Code == http.StatusOK {
		t.Skip("this graph needs no per-device list") // the propagation chose no permute
	}
	p := requireProblem(t, rec, http.StatusUnprocessableEntity, slugResponseTooLarge)
	assert.Equal(t, []string{"steps"}, fields(p))
}

// nestedWhiles is a graph whose while ops nest depth deep: unchecked, a reader
// quadratic in depth would run for minutes at 2,490.
func nestedWhiles(depth int) string {
	var b strings.Builder
	b.WriteString(`{"mesh":"x=2","tensors":{"t":{"shape":[4]},"u":{"shape":[4]},"c":{"shape":[],"dtype":"pred"}},"inputs":["t"],"ops":[`)
	for range depth {
		b.WriteString(`{"op":"while","operands":[],"results":[],"cond":{"params":[],"ops":[],"returns":[]},"body":{"params":[],"returns":[],"ops":[`)
	}
	for range depth {
		b.WriteString(`]}}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

func TestGraphDepthLimit(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxGraphDepth = 8 })
	// Ops inside 9 whiles pass the JSON depth limit and fail the graph's; inside 2,489
	// the body fails the JSON depth limit before it is decoded.
	for _, tc := range []struct {
		depth int
		limit string
	}{{10, "SHARDPLAN_MAX_GRAPH_DEPTH"}, {2490, "SHARDPLAN_MAX_JSON_DEPTH"}} {
		rec := do(t, s, http.MethodPost, "/v1/graph", "application/json", nestedWhiles(tc.depth))
		p := requireProblem(t, rec, http.StatusBadRequest, slugLimitExceeded)
		require.Len(t, p.Errors, 1, p.Detail)
		assert.True(t, strings.HasPrefix(p.Errors[0].Field, "ops[0]"+strings.Repeat(".body.ops[0]", 8)), p.Errors[0].Field)
		assert.Contains(t, p.Errors[0].Message, tc.limit)
	}
	rec := do(t, s, http.MethodPost, "/v1/graph", "application/json", nestedWhiles(9))
	assert.NotContains(t, rec.Body.String(), slugLimitExceeded, "ops inside 8 whiles are within the limit")
}
