package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJSONTooDeep(t *testing.T) {
	tests := []struct {
		body  string
		limit int
		path  string
		deep  bool
	}{
		{`{"a":{"b":[1,{"c":2}]}}`, 4, "", false},
		{`{"a":{"b":[1,{"c":[2]}]}}`, 4, "a.b[1].c", true},
		{`{"x":"{[{[","a":[[[]]]}`, 3, "a[0][0]", true},
		{`{"x":"\"{[","a":{"k\"":{}}}`, 2, `a.k\"`, true},
		{`[0,1,[2,[3]]]`, 2, "[2][1]", true},
		{`{"a":1,"b":{"c":{}}}`, 2, "b.c", true},
		{`{"a":1,"b":{"c":{}}}`, 0, "", false},
		{`{"a":[`, 1, "a", true},             // malformed: still no panic
		{`]]]}}}"`, 1, "", false},            // closes before opens
		{`{"a":"unterminated`, 1, "", false}, // a string to the end
	}
	for _, tc := range tests {
		path, deep := jsonTooDeep([]byte(tc.body), tc.limit)
		assert.Equal(t, tc.deep, deep, tc.body)
		assert.Equal(t, tc.path, path, tc.body)
	}
}

// TestDeepBodiesRejectedBeforeDecoding posts bodies nested far deeper than the limit:
// each is a 400 naming where, found by one pass over the bytes (an 8,000-deep object
// and a 9,000-deep mesh each took seconds in the decoders' path building).
func TestDeepBodiesRejectedBeforeDecoding(t *testing.T) {
	s := newTestServer(t, nil)
	nest := func(depth int, key, leaf string) string {
		return strings.Repeat(`{"`+key+`":`, depth) + leaf + strings.Repeat("}", depth)
	}
	limit := DefaultLimits().MaxJSONDepth
	tests := []struct{ path, body, field string }{
		{"/v1/reshard", nest(8000, "a", "1"), strings.Repeat("a.", limit-1) + "a"},
		{"/v1/reshard", `{"mesh":` + nest(9000, "a", "1") + `,"shape":[4],"dtype":"f32","source":[null],"target":[null]}`, "mesh" + strings.Repeat(".a", limit-1)},
		{"/v1/graph", `{"mesh":"x=2","ops":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`, "ops" + strings.Repeat("[0]", limit-1)},
		{"/v1/tiles", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, "sharding" + strings.Repeat("[0]", limit-1)},
	}
	for _, tc := range tests {
		rec := do(t, s, http.MethodPost, tc.path, "application/json", tc.body)
		p := requireProblem(t, rec, http.StatusBadRequest, slugLimitExceeded)
		require.Len(t, p.Errors, 1)
		assert.Equal(t, tc.field, p.Errors[0].Field)
		assert.Contains(t, p.Errors[0].Message, "SHARDPLAN_MAX_JSON_DEPTH")
	}
	// At the limit, the body is decoded as usual (here: an unknown field).
	rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", nest(limit, "a", "1"))
	requireProblem(t, rec, http.StatusBadRequest, slugInvalidRequest)
}
