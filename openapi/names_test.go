package openapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wireNames are the schema names the api package declares for its wire types: swag
// publishes a type under the name of its "// @name X" comment, and any other type
// under its Go package and type name ("planner.Transfer").
func wireNames(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "api", "*.go"))
	require.NoError(t, err)
	names := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^}\s*//\s*@name\s+(\S+)\s*$`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range decl.FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
	}
	require.Contains(t, names, "ReshardResponse", "the api's @name comments are found")
	return names
}

// internalPackages are the names of the module's internal packages.
func internalPackages(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("..", "internal"))
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	require.Contains(t, out, "planner")
	return out
}

// TestSchemasAreWireTypes: every schema the published documents define (swagger.json's
// definitions, openapi3.json's components) and every $ref in them (and in swagger.yaml)
// is one of the api's wire types, by its @name: none is named after a Go package
// (planner.Transfer, sharding.DeviceTile, api.Foo), so the spec a client generates
// from names no internal type and survives the domain's refactors.
func TestSchemasAreWireTypes(t *testing.T) {
	names := wireNames(t)
	internal := internalPackages(t)
	check := func(where, name string) {
		t.Helper()
		if pkg, _, ok := strings.Cut(name, "."); ok {
			switch {
			case slices.Contains(internal, pkg):
				t.Errorf("%s names %s, a type of the internal package %s: give the answer an api wire type", where, name, pkg)
			default:
				t.Errorf("%s names %s, a Go package's type: end its declaration with // @name", where, name)
			}
			return
		}
		assert.True(t, names[name], "%s names %s, which no api type declares with // @name", where, name)
	}

	var v2 struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(JSON, &v2))
	require.NotEmpty(t, v2.Definitions)
	for name := range v2.Definitions {
		check("swagger.json definitions", name)
	}
	var v3 struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(JSON3, &v3))
	require.NotEmpty(t, v3.Components.Schemas)
	for name := range v3.Components.Schemas {
		check("openapi3.json components", name)
	}

	yaml, err := os.ReadFile("swagger.yaml")
	require.NoError(t, err)
	ref := regexp.MustCompile(`#/(?:definitions|components/schemas)/([^/"'\s]+)`)
	for file, doc := range map[string][]byte{"swagger.json": JSON, "openapi3.json": JSON3, "swagger.yaml": yaml} {
		refs := ref.FindAllSubmatch(doc, -1)
		require.NotEmpty(t, refs, file)
		for _, m := range refs {
			name := string(m[1])
			check(file+" $ref", name)
			if file == "openapi3.json" {
				assert.Contains(t, v3.Components.Schemas, name, "%s: $ref to an undefined schema", file)
			} else {
				assert.Contains(t, v2.Definitions, name, "%s: $ref to an undefined definition", file)
			}
		}
	}
}
