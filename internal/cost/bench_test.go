package cost

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkEstimate runs over profile × group rank × kind. Run with
//
//	go test -run '^$' -bench Estimate -benchmem ./internal/cost/
func BenchmarkEstimate(b *testing.B) {
	grid := []struct {
		profile, mesh string
		axes          []string
	}{
		{"tpu-v5p", "x=4,y=4,z=8", []string{"z"}},
		{"tpu-v5p", "x=4,y=4,z=8", []string{"x", "y", "z"}},
		{"tpu-v5p+dcn", "dcn=2,x=4,y=4,z=4", []string{"dcn", "x", "y", "z"}},
		{"h100", "node=4,gpu=8", []string{"gpu"}},
		{"h100", "node=4,gpu=8", []string{"node", "gpu"}},
	}
	for _, g := range grid {
		var model Model
		if g.profile == "tpu-v5p+dcn" {
			model = mustResolve(b, `{"base":"tpu-v5p","axis_links":{"dcn":"dcn"}}`)
		} else {
			model, _ = Profile(g.profile)
		}
		m := testMesh(b, g.mesh)
		for _, kind := range []Kind{AllGather, AllReduce, AllToAll, CollectivePermute} {
			c := Collective{Kind: kind, Bytes: 1 << 28, Mesh: m, Axes: group(b, m, g.axes...), Hops: 1}
			b.Run(fmt.Sprintf("%s/%s/rank=%d/%s", g.profile, g.mesh, len(g.axes), kind), func(b *testing.B) {
				require.Positive(b, model.Estimate(c).TimeUS)
				b.ReportAllocs()
				for b.Loop() {
					model.Estimate(c)
				}
			})
		}
	}
}
