package api

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRawModuleNotReencoded posts a raw module full of the characters JSON escapes six
// bytes each: it is parsed as sent, so the request allocates a small multiple of its
// body (escaped into a JSON envelope and decoded again it allocated 50 times the body).
func TestRawModuleNotReencoded(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxGraphBodyBytes = 64 << 20 })
	module := `func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> { return %arg0 : tensor<4xf32> } // ` + strings.Repeat("<&>", 4<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := do(t, s, http.MethodPost, "/v1/graph?mesh=x%3D2", mlirMediaType, module)
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(6*len(module)), "allocated %d MB for a %d MB module", allocated>>20, len(module)>>20)
}

// TestRawModuleMatchesJSONEnvelope checks that a raw module with query parameters and
// the JSON body naming the same fields get the same plan.
func TestRawModuleMatchesJSONEnvelope(t *testing.T) {
	s := newTestServer(t, nil)
	const module = `sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}`
	raw := do(t, s, http.MethodPost, "/v1/graph?cost_model=h100&strategy=xla&conflict_resolution=basic&op_priority=false&include=ops", mlirMediaType, module)
	require.Equal(t, http.StatusOK, raw.Code, raw.Body.String())
	env, _ := json.Marshal(map[string]any{"module": module, "cost_model": "h100", "strategy": "xla",
		"options": map[string]any{"conflict_resolution": "basic", "op_priority": false}, "include": []string{"ops"}})
	viaJSON := do(t, s, http.MethodPost, "/v1/graph", "application/json", string(env))
	require.Equal(t, http.StatusOK, viaJSON.Code, viaJSON.Body.String())
	assert.JSONEq(t, viaJSON.Body.String(), raw.Body.String())

	bad := do(t, s, http.MethodPost, "/v1/graph?op_priority=maybe", mlirMediaType, module)
	p := requireProblem(t, bad, http.StatusBadRequest, slugInvalidRequest)
	assert.Equal(t, []string{"op_priority"}, fields(p))
}
