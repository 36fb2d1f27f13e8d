package sharding

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLayout(t *testing.T) {
	m := mustMesh(t, "x=2,y=4,z=2")
	tests := []struct {
		name, in, want string
	}{
		{"already a layout", `[{"x"}, {}]`, `[{"x"}, {}]`},
		{"open dims close", `[{"x", ?}, {?}]`, `[{"x"}, {}]`},
		{"priorities go", `[{"x"}p1, {"y"}p0]`, `[{"x"}, {"y"}]`},
		{"the replicated list goes", `[{"x"}, {}], replicated={"z"}`, `[{"x"}, {}]`},
		{"unreduced axes stay", `[{"x"}, {}], unreduced={"y"}`, `[{"x"}, {}], unreduced={"y"}`},
		{"sub-axes stay", `[{"y":(1)2}, {"x", ?}p2]`, `[{"y":(1)2}, {"x"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, jsonString(tc.in), m, []int64{8, 8})
			before := s.Clone()
			got := s.Layout()
			assert.Equal(t, tc.want, got.Body())
			assert.True(t, got.SameLayout(s), "the same tiles")
			for i := range got.Dims {
				if len(got.Dims[i].Axes) > 0 {
					got.Dims[i].Axes[0].Name = "changed"
				}
			}
			assert.True(t, s.Equal(before), "Layout shares no memory with s")
		})
	}
}
