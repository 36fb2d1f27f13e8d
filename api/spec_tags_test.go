package api

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSpecTagsMatchValidation keeps the OpenAPI constraints (swag's enums, minimum,
// maximum tags) equal to what the validator enforces (validate's oneof, gte, lte), so
// the spec never documents a value the service rejects or the reverse.
func TestSpecTagsMatchValidation(t *testing.T) {
	for _, v := range []any{TilesRequest{}, ReshardRequest{}, GraphRequest{}, AuditRequest{}} {
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			f := rt.Field(i)
			rules := strings.Split(f.Tag.Get("validate"), ",")
			for _, r := range rules {
				name := rt.Name() + "." + f.Name
				switch {
				case strings.HasPrefix(r, "oneof="):
					want := strings.ReplaceAll(strings.TrimPrefix(r, "oneof="), " ", ",")
					assert.Equal(t, want, f.Tag.Get("enums"), "%s: enums tag vs validate oneof", name)
				case strings.HasPrefix(r, "gte=") && !isSlice(f):
					assert.Equal(t, strings.TrimPrefix(r, "gte="), f.Tag.Get("minimum"), "%s: minimum vs gte", name)
				case strings.HasPrefix(r, "lte=") && !isSlice(f):
					assert.Equal(t, strings.TrimPrefix(r, "lte="), f.Tag.Get("maximum"), "%s: maximum vs lte", name)
				}
			}
		}
	}
}

// isSlice: gte after dive applies to the elements, which swag documents from the items.
func isSlice(f reflect.StructField) bool { return f.Type.Kind() == reflect.Slice }
