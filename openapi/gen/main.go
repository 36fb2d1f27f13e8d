// Command gen converts the Swagger 2.0 document swag writes (openapi/swagger.json) into
// OpenAPI 3 (openapi/openapi3.json) and describes the fields a request may give in
// several forms with oneOf: a mesh (string or object), a sharding (Shardy or framework
// text, PartitionSpec-like array, or object) and a cost model (name or object). Go's
// types cannot say that, so swag types them object; clients generated from the 3.0
// document accept every documented form. Run after swag:
//
//	go tool swag init -g cmd/shardplan-server/main.go -o openapi --outputTypes json,yaml && go run ./openapi/gen
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
)

func main() {
	dir := "openapi"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := run(dir); err != nil {
		fmt.Fprintln(os.Stderr, "openapi/gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "swagger.json"))
	if err != nil {
		return err
	}
	var v2 openapi2.T
	if err := json.Unmarshal(raw, &v2); err != nil {
		return err
	}
	v3, err := openapi2conv.ToV3(&v2)
	if err != nil {
		return err
	}
	if err := polymorphic(v3); err != nil {
		return err
	}
	out, err := json.MarshalIndent(v3, "", "    ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "openapi3.json"), append(out, '\n'), 0o644)
}

// The input forms, as schemas.
func meshInput() *openapi3.SchemaRef {
	return oneOf("a mesh: \"x=2,y=4\", a mesh as JAX, Shardy or torch print it (\"Mesh('x': 2, 'y': 4)\", \"sdy.mesh @mesh = <[\\\"x\\\"=2]>\", \"DeviceMesh('cuda', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))\"), or a mesh object",
		&openapi3.Schema{Type: &openapi3.Types{"string"}, Example: "x=2,y=4"},
		&openapi3.Schema{Type: &openapi3.Types{"object"}, Properties: openapi3.Schemas{
			"name":       {Ref: "#/components/schemas/MeshObject/properties/name"},
			"axes":       openapi3.NewArraySchema().WithItems(openapi3.NewObjectSchema()).NewRef(),
			"device_ids": openapi3.NewArraySchema().WithItems(openapi3.NewIntegerSchema()).NewRef(),
		}, Required: []string{"axes"}})
}

func shardingInput() *openapi3.SchemaRef {
	axis := []*openapi3.SchemaRef{openapi3.NewStringSchema().NewRef(), openapi3.NewIntegerSchema().NewRef()}
	entry := &openapi3.Schema{Nullable: true, OneOf: append(openapi3.SchemaRefs{
		openapi3.NewArraySchema().WithItems(&openapi3.Schema{OneOf: axis}).NewRef(),
	}, axis...)}
	return oneOf("a sharding: Shardy text (also #sdy.sharding<@mesh, [...]> as printed), XLA HloSharding (also an HLO dump's sharding={...}, metadata={...}), P(...) or jax.Array.sharding text, DTensor placements as printed ((Shard(dim=0), Replicate())); a PartitionSpec-like array (one entry per dim: null, an axis name or index, or a list of them); or an object (dims, replicated, unreduced, or DTensor placements as a list or as printed)",
		&openapi3.Schema{Type: &openapi3.Types{"string"}, Example: "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
		&openapi3.Schema{Type: &openapi3.Types{"array"}, Items: entry.NewRef(), Example: []any{"x", nil}},
		&openapi3.Schema{Type: &openapi3.Types{"object"}, Properties: openapi3.Schemas{
			"dims":       openapi3.NewArraySchema().WithItems(openapi3.NewObjectSchema()).NewRef(),
			"replicated": openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema()).NewRef(),
			"unreduced":  openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema()).NewRef(),
			"placements": {Value: &openapi3.Schema{OneOf: openapi3.SchemaRefs{
				openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema()).NewRef(),
				openapi3.NewStringSchema().NewRef(),
			}}},
		}})
}

func costModelInput() *openapi3.SchemaRef {
	return oneOf("a cost model: a profile name from GET /v1/cost-models, or an object (a base profile and overrides, or a whole model)",
		&openapi3.Schema{Type: &openapi3.Types{"string"}, Example: "tpu-v5p"},
		openapi3.NewObjectSchema())
}

func oneOf(desc string, forms ...*openapi3.Schema) *openapi3.SchemaRef {
	s := &openapi3.Schema{Description: desc}
	for _, f := range forms {
		s.OneOf = append(s.OneOf, f.NewRef())
	}
	return s.NewRef()
}

// polymorphic replaces the object-typed input fields of the request schemas.
func polymorphic(doc *openapi3.T) error {
	fields := map[string]map[string]func() *openapi3.SchemaRef{
		"ReshardRequest":    {"mesh": meshInput, "source": shardingInput, "target": shardingInput, "cost_model": costModelInput},
		"TilesRequest":      {"mesh": meshInput, "sharding": shardingInput},
		"GraphRequest":      {"mesh": meshInput, "cost_model": costModelInput},
		"AuditRequest":      {"mesh": meshInput, "cost_model": costModelInput},
		"GraphTensor":       {"sharding": shardingInput},
		"TransferRequest":   {"cost_model": costModelInput},
		"TransferPlacement": {"mesh": meshInput},
		"TransferTensor":    {"source": shardingInput, "target": shardingInput},
	}
	for name, props := range fields {
		ref, ok := doc.Components.Schemas[name]
		if !ok || ref.Value == nil {
			return fmt.Errorf("schema %s missing from swagger.json", name)
		}
		for field, mk := range props {
			old, ok := ref.Value.Properties[field]
			if !ok {
				return fmt.Errorf("schema %s has no field %s", name, field)
			}
			s := mk()
			if old.Value != nil && old.Value.Description != "" {
				s.Value.Description = old.Value.Description + " (" + s.Value.Description + ")"
			}
			ref.Value.Properties[field] = s
		}
	}
	return nil
}
