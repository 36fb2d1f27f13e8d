package openapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadV3(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(JSON3)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "openapi3.json is a valid OpenAPI 3 document")
	return doc
}

func requestSchema(t *testing.T, doc *openapi3.T, path string) *openapi3.Schema {
	t.Helper()
	item := doc.Paths.Find(path)
	require.NotNil(t, item, path)
	require.NotNil(t, item.Post, path)
	mt := item.Post.RequestBody.Value.Content.Get("application/json")
	require.NotNil(t, mt, path)
	return mt.Schema.Value
}

// TestExamplesValidate: every request of examples/ validates against the OpenAPI 3
// request schema of its endpoint, whatever form it gives its mesh, shardings and cost
// model in (a generated client built from the spec accepts what the service accepts).
func TestExamplesValidate(t *testing.T) {
	doc := loadV3(t)
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		base := filepath.Base(f)
		path := "/v1/reshard"
		switch {
		case strings.HasPrefix(base, "tiles-"):
			path = "/v1/tiles"
		case strings.HasPrefix(base, "graph-"):
			path = "/v1/graph"
		case strings.HasPrefix(base, "audit-"):
			path = "/v1/audit"
		case strings.HasPrefix(base, "transfer-"):
			path = "/v1/transfer"
		}
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var v any
		require.NoError(t, json.Unmarshal(raw, &v))
		assert.NoError(t, requestSchema(t, doc, path).VisitJSON(v), base)
	}
}

// TestShardingForms: each documented form of a sharding (and of a mesh and a cost model)
// validates, and a form the service refuses (a number) does not.
func TestShardingForms(t *testing.T) {
	doc := loadV3(t)
	s := requestSchema(t, doc, "/v1/reshard")
	for _, src := range []string{
		`"[{\"x\"}, {}]"`, `"{devices=[2,1,4]<=[8] last_tile_dim_replicate}"`, `"P('x', None)"`,
		`["x", null]`, `[[0], [1, "y"]]`, `{"dims": [{"axes": ["x"]}, {"axes": []}]}`,
		`{"placements": ["Shard(0)", "Replicate()"]}`,
	} {
		for _, mesh := range []string{`"x=2,y=4"`, `{"axes": [{"name": "x", "size": 2}, {"name": "y", "size": 4}]}`} {
			for _, model := range []string{`"tpu-v5p"`, `{"base": "h100"}`} {
				body := `{"mesh": ` + mesh + `, "shape": [8, 8], "dtype": "f32", "source": ` + src + `, "target": ["y", null], "cost_model": ` + model + `}`
				var v any
				require.NoError(t, json.Unmarshal([]byte(body), &v))
				assert.NoError(t, s.VisitJSON(v), body)
			}
		}
	}
	var bad any
	require.NoError(t, json.Unmarshal([]byte(`{"mesh": "x=2", "shape": [8], "dtype": "f32", "source": 7, "target": ["x"]}`), &bad))
	assert.Error(t, s.VisitJSON(bad), "a number is no sharding")
}

// TestParameterDescriptionsWhole: no description is cut short by a quote swag's
// annotation parser stopped at (it ends a description at an escaped quote).
func TestParameterDescriptionsWhole(t *testing.T) {
	doc := loadV3(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range op.Parameters {
				d := p.Value.Description
				assert.False(t, strings.HasSuffix(d, `\`) || strings.Count(d, `"`)%2 == 1 || strings.HasSuffix(strings.TrimSpace(d), " as"),
					"%s %s parameter %s: description cut short: %q", method, path, p.Value.Name, d)
			}
		}
	}
}
