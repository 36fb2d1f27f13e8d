package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/planner"
)

// TestReshardXLAHalo: uneven reshards under strategy xla answer XLA's halo
// collective_permute (dim, pairs, transfers; runs above the list limit) instead of
// all_to_all_v, and the following step reads the windows.
func TestReshardXLAHalo(t *testing.T) {
	cases := []struct {
		name, src, tgt string
		ops            []string
		pairs          [][2]int
	}{
		{"[x] -> [x,y]", `["x", null]`, `[["x", "y"], null]`, []string{"collective_permute", "slice"}, [][2]int{{2, 0}, {3, 1}}},
		{"[x,y] -> [x]", `[["x", "y"], null]`, `["x", null]`, []string{"collective_permute", "all_gather"}, [][2]int{{1, 2}, {2, 3}}},
	}
	for _, limit := range []int{1024, 2} {
		s := newTestServer(t, func(d *Deps) { d.Limits.ListDeviceLimit = limit })
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := postReshard(t, s, `{"mesh": "x=2,y=2", "shape": [6, 4], "dtype": "f32", "strategy": "xla",
				  "source": `+tc.src+`, "target": `+tc.tgt+`}`)
				var got []string
				for _, st := range r.Steps {
					got = append(got, st.Op)
				}
				require.Equal(t, tc.ops, got)
				cp := r.Steps[0]
				require.NotNil(t, cp.Dim)
				assert.Equal(t, 0, *cp.Dim)
				assert.Equal(t, cp.Before, cp.After, "a halo exchange keeps the sharding")
				assert.Equal(t, int64(16), cp.BytesPerDevice, "one row of 4 f32")
				pairs, transfers := cp.Pairs, cp.Transfers
				if limit < 4 {
					assert.Empty(t, cp.Pairs, "runs above the list limit")
					pairs, transfers = nil, nil
					for _, run := range cp.PairRuns {
						pairs = append(pairs, run.Expand()...)
					}
					for _, run := range cp.TransferRuns {
						transfers = append(transfers, run.Expand()...)
					}
				}
				assert.ElementsMatch(t, tc.pairs, pairs)
				require.Len(t, transfers, len(tc.pairs))
				for _, tr := range transfers {
					assert.Equal(t, planner.Range{{3, 4}, {0, 4}}[1], tr.Ranges[1])
					assert.Equal(t, int64(1), tr.Ranges[0][1]-tr.Ranges[0][0], "one row: %+v", tr)
					assert.Contains(t, tc.pairs, [2]int{tr.From, tr.To})
				}
			})
		}
	}
}
