package main

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAmplifyingRequests sends requests built to amplify to the real service (transfer
// lists of 268 MB and more, while ops 2,490 deep): each is a 4xx problem naming its
// limit, and the process allocates little answering them.
func TestAmplifyingRequests(t *testing.T) {
	base, _, _, _ := startServer(t, nil)
	const amplifying = `{"mesh":"a=%d,b=%d","shape":[1024,1024],"dtype":"f32","source":[["a","b"],null],"target":[null,["a","b"]],"include":["transfers"]}`
	var nested strings.Builder
	nested.WriteString(`{"mesh":"x=2","tensors":{"t":{"shape":[4]}},"ops":[`)
	for range 2490 {
		nested.WriteString(`{"op":"while","operands":[],"results":[],"cond":{"params":[],"ops":[],"returns":[]},"body":{"params":[],"returns":[],"ops":[`)
	}
	nested.WriteString(strings.Repeat(`]}}`, 2490) + `]}`)
	tests := []struct {
		name, path, body string
		status           int
		limit            string
	}{
		{"transfers on a=32,b=32", "/v1/reshard", fmt.Sprintf(amplifying, 32, 32), http.StatusUnprocessableEntity, "SHARDPLAN_MAX_RESPONSE_BYTES"},
		{"transfers on a=64,b=64", "/v1/reshard", fmt.Sprintf(amplifying, 64, 64), http.StatusUnprocessableEntity, "SHARDPLAN_MAX_RESPONSE_BYTES"},
		{"while ops 2,490 deep", "/v1/graph", nested.String(), http.StatusBadRequest, "SHARDPLAN_MAX_JSON_DEPTH"}, // refused before the body is decoded
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, body := send(t, http.MethodPost, base+tc.path, "application/json", strings.NewReader(tc.body))
			runtime.ReadMemStats(&after)
			assert.Equal(t, tc.status, resp.StatusCode, string(body))
			assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			assert.Contains(t, string(body), tc.limit)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated while answering")
		})
	}
}
