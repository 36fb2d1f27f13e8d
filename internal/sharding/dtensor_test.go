package sharding_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardplan/shardplan/internal/sharding"
)

func TestParsePlacements(t *testing.T) {
	cases := []struct {
		name, mesh, raw, want string // want in Shardy's body form
		shape                 []int64
	}{
		{"shard and replicate", "dp=2,tp=4", `{"placements": ["Shard(0)", "Replicate()"]}`, `[{"dp"}, {}]`, []int64{8, 8}},
		{"partial", "dp=2,tp=4", `{"placements": ["Shard(1)", "Partial()"]}`, `[{}, {"dp"}], unreduced={"tp"}`, []int64{8, 8}},
		{"partial sum spellings", "a=2,b=2,c=2", `{"placements": ["Partial(sum)", "Partial(reduce_op='sum')", "P"]}`, `[{}], unreduced={"a", "b", "c"}`, []int64{8}},
		{"two shards on one dim: mesh dim 0 major", "dp=2,tp=4", `{"placements": ["Shard(0)", "Shard(0)"]}`, `[{"dp", "tp"}, {}]`, []int64{8, 8}},
		{"short forms", "dp=2,tp=4", `{"placements": ["S(1)", "R"]}`, `[{}, {"dp"}]`, []int64{8, 8}},
		{"keyword and negative dim", "dp=2,tp=4", `{"placements": ["Shard(dim=-1)", "Shard(0)"]}`, `[{"tp"}, {"dp"}]`, []int64{8, 8}},
		{"strided shard (FSDP2 + TP)", "dp=2,tp=4", `{"placements": ["_StridedShard(0, split_factor=4)", "Shard(0)"]}`, `[{"tp", "dp"}, {}]`, []int64{8, 8}},
		{"rank from the placements", "dp=2,tp=4", `{"placements": ["Replicate()", "Shard(1)"]}`, `[{}, {"tp"}]`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := sharding.MustMesh(t, tc.mesh)
			sharding.RequireShardy(t, sharding.MustParse(t, tc.raw, m, tc.shape), m, tc.shape, tc.want)
		})
	}
}

// TestPlacementsTilesMatchDTensor checks the tiles against DTensor's own rule, written out
// here: for each mesh dim in order, a Shard(d) cuts the device's current chunk of dim d
// into that mesh dim's size and keeps the piece at the device's coordinate.
func TestPlacementsTilesMatchDTensor(t *testing.T) {
	m := sharding.MustMesh(t, "a=2,b=3,c=2")
	shape := []int64{12, 6}
	for _, raw := range []string{
		`{"placements": ["Shard(0)", "Shard(0)", "Shard(1)"]}`,
		`{"placements": ["Shard(1)", "Shard(0)", "Shard(0)"]}`,
		`{"placements": ["Shard(0)", "Replicate()", "Shard(0)"]}`,
	} {
		s := sharding.MustParse(t, raw, m, shape)
		dims := map[string]int{}
		for d, ds := range s.Dims {
			for _, r := range ds.Axes {
				dims[r.Name] = d
			}
		}
		l := sharding.NewLayout(m, shape, s)
		for _, tile := range l.Tiles(nil) {
			lo := []int64{0, 0}
			size := append([]int64(nil), shape...)
			for i, a := range m.Axes {
				d, ok := dims[a.Name]
				if !ok {
					continue
				}
				size[d] /= int64(a.Size)
				lo[d] += int64(tile.Coords[i]) * size[d]
			}
			for d := range shape {
				assert.Equal(t, [2]int64{lo[d], lo[d] + size[d]}, tile.Ranges[d], "%s device %d dim %d", raw, tile.Device, d)
			}
		}
	}
}

func TestParsePlacementsErrors(t *testing.T) {
	m := sharding.MustMesh(t, "dp=2,tp=4")
	cases := []struct {
		name, raw, field string
		want             []string
	}{
		{"count", `{"placements": ["Shard(0)"]}`, "source.placements", []string{"1 placements", "2 axes"}},
		{"max", `{"placements": ["Shard(0)", "Partial(max)"]}`, "source.placements[1]", []string{"only Partial(sum)", "max"}},
		{"avg", `{"placements": ["Shard(0)", "Partial('avg')"]}`, "source.placements[1]", []string{"only Partial(sum)"}},
		{"unknown", `{"placements": ["Shard(0)", "Split(1)"]}`, "source.placements[1]", []string{"unknown placement"}},
		{"dim range", `{"placements": ["Shard(2)", "Replicate()"]}`, "source.placements[0]", []string{"out of range", "rank-2"}},
		{"no dim", `{"placements": ["Shard()", "Replicate()"]}`, "source.placements[0]", []string{"needs the tensor dim"}},
		{"not a string", `{"placements": [0, "Replicate()"]}`, "source.placements[0]", []string{"placement string"}},
		{"with dims", `{"placements": ["Shard(0)", "Replicate()"], "dims": []}`, "source.placements", []string{"not both"}},
		{"strided alone", `{"placements": ["_StridedShard(0, split_factor=4)", "Replicate()"]}`, "source.placements[0]", []string{"needs a later Shard(0)"}},
		{"strided factor", `{"placements": ["_StridedShard(0, split_factor=2)", "Shard(0)"]}`, "source.placements[0]", []string{"split_factor must be 4"}},
		{"unclosed", `{"placements": ["Shard(0", "Replicate()"]}`, "source.placements[0]", []string{"closing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sharding.Parse([]byte(tc.raw), m, []int64{8, 8}, "source")
			sharding.RequireFieldError(t, err, tc.field, tc.want...)
		})
	}
}
