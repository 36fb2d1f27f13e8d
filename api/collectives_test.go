package api

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardplan/shardplan/internal/collective"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
)

// TestCollectiveNames keeps the wire's lists of op names (struct tags, which cannot
// name constants) equal to the one vocabulary of package collective: the step ops are
// slice and every collective, and a graph's reductions are two of them.
func TestCollectiveNames(t *testing.T) {
	stepOps := []string{string(planner.OpSlice)}
	for _, k := range collective.All {
		stepOps = append(stepOps, string(k))
	}
	var plannerOps []string
	for _, o := range planner.AllOps {
		plannerOps = append(plannerOps, string(o))
	}
	reductions := []string{propagation.AllReduce, propagation.ReduceScatter}
	tag := func(v any, field, key string) []string {
		f, ok := reflect.TypeOf(v).FieldByName(field)
		if !ok {
			t.Fatalf("%T has no field %s", v, field)
		}
		val := f.Tag.Get(key)
		if key == "validate" {
			_, val, _ = strings.Cut(val, "oneof=")
			return strings.Fields(val)
		}
		return strings.Split(val, ",")
	}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"planner.AllOps", plannerOps, stepOps},
		{"Step.op enums", tag(StepJSON{}, "Op", "enums"), stepOps},
		{"allowed_ops enums", tag(ReshardRequest{}, "AllowedOps", "enums"), stepOps},
		{"allowed_ops oneof", tag(ReshardRequest{}, "AllowedOps", "validate"), stepOps},
		{"GraphCollective.reduction enums", tag(GraphCollective{}, "Reduction", "enums"), reductions},
		{"reductions are collectives", reductions, slices.DeleteFunc(slices.Clone(stepOps), func(s string) bool {
			return s != string(collective.AllReduce) && s != string(collective.ReduceScatter)
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.ElementsMatch(t, tc.want, tc.got)
		})
	}
}
