package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// concatGraph is a graph whose answer lists a reshard per operand of one concatenate.
func concatGraph(n int) string {
	var b strings.Builder
	b.WriteString(`{"mesh": "x=2", "tensors": {`)
	for i := range n {
		sh := `["x", null]`
		if i%2 == 0 {
			sh = `[null, "x"]`
		}
		fmt.Fprintf(&b, `"a%d": {"shape": [4, 8], "sharding": %s}, `, i, sh)
	}
	fmt.Fprintf(&b, `"out": {"shape": [%d, 8]}}, "ops": [{"name": "c", "op": "concatenate", "operands": [`, 4*n)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"a%d"`, i)
	}
	b.WriteString(`], "results": ["out"], "attrs": {"dimension": 0}}]}`)
	return b.String()
}

// TestAnswerLimit: on every route an answer over SHARDPLAN_MAX_ANSWER_BYTES is a 422
// response-too-large naming its largest part and the field (an include entry where one
// shrinks it) to change, never a 200; the same request under the limit is answered; an
// answer refused is not memoized (the permalink of a plan stored under a larger limit is
// refused too).
func TestAnswerLimit(t *testing.T) {
	const reshardTiles = `{"mesh": "x=4,y=4", "shape": [64, 64], "dtype": "f32", "source": [["x"], ["y"]], "target": [["y"], ["x"]], "include": ["tiles"]}`
	cases := []struct {
		name, path, ctype, body string
		field, part, fix        string
	}{
		{"reshard tiles", "/v1/reshard", "application/json", reshardTiles, "include", "tiles", `leave "tiles" out of include`},
		{"graph", "/v1/graph", "application/json", concatGraph(400), "ops", "collectives", "split the graph"},
		{"tiles devices", "/v1/tiles", "application/json", `{"mesh": "x=16,y=16", "shape": [64, 64], "dtype": "f32", "sharding": [["x"], ["y"]]}`, "devices", "devices", "to list fewer"},
		{"audit", "/v1/audit", "application/json", concatGraph(400), "module", "sites", "smaller program"},
		{"transfer tensors", "/v1/transfer", "application/json", strings.Replace(smallTransfer, `"cost_model": "h100",`, `"cost_model": "h100", "include": ["transfers"],`, 1), "include", "groups", `leave "transfers" out of include`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			memo := &lookupMemo{fakeMemo: fakeMemo{store: map[string][]byte{}}}
			open := newTestServer(t, func(d *Deps) { d.Memo = memo })
			rec := do(t, open, http.MethodPost, tc.path, tc.ctype, tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			size := rec.Body.Len()
			part, partBytes := largestMember(rec.Body.Bytes())
			if tc.part != "" {
				require.Equal(t, tc.part, part)
			}
			t.Logf("answer %d bytes, largest part %q %d bytes", size, part, partBytes)

			// One byte under the answer: refused. At its size: answered.
			limited := newTestServer(t, func(d *Deps) { d.Limits.MaxAnswerBytes = int64(size) - 1 })
			p := requireProblem(t, do(t, limited, http.MethodPost, tc.path, tc.ctype, tc.body), http.StatusUnprocessableEntity, slugResponseTooLarge)
			require.Len(t, p.Errors, 1)
			assert.Equal(t, tc.field, p.Errors[0].Field)
			assert.Contains(t, p.Detail, "SHARDPLAN_MAX_ANSWER_BYTES")
			assert.Contains(t, p.Detail, fmt.Sprintf("its largest part is %q", part))
			assert.Contains(t, p.Detail, tc.fix)
			again := requireProblem(t, do(t, limited, http.MethodPost, tc.path, tc.ctype, tc.body), http.StatusUnprocessableEntity, slugResponseTooLarge)
			assert.Equal(t, p.Detail, again.Detail, "a refused answer was not memoized")
			fits := newTestServer(t, func(d *Deps) { d.Limits.MaxAnswerBytes = int64(size) })
			rec = do(t, fits, http.MethodPost, tc.path, tc.ctype, tc.body)
			assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Equal(t, size, rec.Body.Len())

			if tc.path != "/v1/reshard" {
				return
			}
			// The permalink of the plan memoized under the open server's limit.
			var r struct {
				PlanID string `json:"plan_id"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
			shared := newTestServer(t, func(d *Deps) { d.Memo = memo; d.Limits.MaxAnswerBytes = int64(size) - 1 })
			p = requireProblem(t, do(t, shared, http.MethodGet, "/v1/plans/"+r.PlanID, "", ""), http.StatusUnprocessableEntity, slugResponseTooLarge)
			assert.Equal(t, "plan_id", p.Errors[0].Field)
			// A hit of the exact-request memo is bounded as well.
			p = requireProblem(t, do(t, shared, http.MethodPost, tc.path, tc.ctype, tc.body), http.StatusUnprocessableEntity, slugResponseTooLarge)
			assert.Equal(t, tc.field, p.Errors[0].Field)
		})
	}
}

// TestLargestMember: the largest top-level member of a JSON object and its encoded size.
func TestLargestMember(t *testing.T) {
	cases := []struct {
		body string
		name string
		size int64
	}{
		{`{"a": [1, 2, 3], "bb": "xy", "c": {"d": [1, 2, 3, 4]}}`, "c", 19},
		{`{"only":1}`, "only", 1},
		{`{}`, "", 0},
		{`[1, 2]`, "", 0},
		{`text answer`, "", 0},
		{``, "", 0},
	}
	for _, tc := range cases {
		name, size := largestMember([]byte(tc.body))
		assert.Equal(t, tc.name, name, tc.body)
		assert.Equal(t, tc.size, size, tc.body)
	}
}
