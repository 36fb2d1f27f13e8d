package cost_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
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
		var model cost.Model
		if g.profile == "tpu-v5p+dcn" {
			model = cost.MustResolve(b, `{"base":"tpu-v5p","axis_links":{"dcn":"dcn"}}`)
		} else {
			model, _ = cost.Profile(g.profile)
		}
		m := cost.TestMesh(b, g.mesh)
		for _, kind := range []cost.Kind{cost.AllGather, cost.AllReduce, cost.AllToAll, cost.CollectivePermute} {
			c := cost.Collective{Kind: kind, Bytes: 1 << 28, Mesh: m, Axes: cost.Group(b, m, g.axes...), Hops: 1}
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
