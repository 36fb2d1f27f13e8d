package planner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStructuredLink(t *testing.T) {
	cases := []struct {
		name string
		u, v state
		want cedge
		ok   bool
	}{
		{"gather a minor suffix", state{{1, 2}, {3}}, state{{1}, {3}}, cedge{op: OpAllGather, dim: 0, group: []uint8{2}}, true},
		{"gather a whole dim", state{{1, 2}, {3}}, state{{}, {3}}, cedge{op: OpAllGather, dim: 0, group: []uint8{1, 2}}, true},
		{"all-to-all to the minor end", state{{1, 2}, {3}}, state{{1}, {3, 2}}, cedge{op: OpAllToAll, dim: 0, dim2: 1, group: []uint8{2}}, true},
		{"all-to-all the other way", state{{1}, {3, 2}}, state{{1, 2}, {3}}, cedge{op: OpAllToAll, dim: 1, dim2: 0, group: []uint8{2}}, true},
		{"a major atom moves: no single step", state{{1, 2}, {3}}, state{{2}, {3, 1}}, cedge{}, false},
		{"a slice is not a collective", state{{1}, {3}}, state{{1, 2}, {3}}, cedge{}, false},
		{"the suffix lands in the middle", state{{1, 2}, {3, 4}}, state{{1}, {3, 2, 4}}, cedge{}, false},
		{"three dims change", state{{1}, {2}, {3}}, state{{}, {2, 1}, {}}, cedge{}, false},
		{"the same state", state{{1}, {2}}, state{{1}, {2}}, cedge{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := structuredLink(tc.u, tc.v)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.want, got)
			}
		})
	}
}
