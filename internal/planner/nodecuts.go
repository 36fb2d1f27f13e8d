package planner

import (
	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/sharding"
)

// nodeIngresser is implemented by GPU models that know their nodes (cost.Fabric).
type nodeIngresser interface {
	NodeIngress(*sharding.Mesh) (gpusPerNode int, nicBW float64, ok bool)
}

// nodeCuts are the sub-axis boundaries that part a node's GPUs from the rest of the
// fabric on model's nodes of G consecutive row-major mesh positions: for every axis of
// stride s < G, with s dividing G, that crosses nodes (k = G/s divides its size n and
// k < n), the boundary n/k, so that the sub-axis x:(n/k)k is the axis' part inside one
// node and x:(1)(n/k) its part across nodes. Prime factors alone order the atoms of an
// axis smallest first (80 = 2·2·2·2·5 puts 5 minor-most) and leave no sub-axis that is
// "the 8 GPUs of a node"; with the cut, 80 on nodes of 8 splits as (2·5)(2·2·2). Nil
// when model has no nodes on m (a TPU model, a mesh within one node, axis_links set).
func nodeCuts(m *sharding.Mesh, model cost.Model) map[string]int {
	ni, ok := model.(nodeIngresser)
	if !ok || m == nil {
		return nil
	}
	g, _, ok := ni.NodeIngress(m)
	if !ok || g <= 1 {
		return nil
	}
	var cuts map[string]int
	for _, ax := range m.Axes {
		s := m.Stride(ax.Name)
		if ax.Size <= 1 || s <= 0 || s >= g || g%s != 0 {
			continue
		}
		k := g / s
		if k >= ax.Size || ax.Size%k != 0 {
			continue
		}
		if cuts == nil {
			cuts = map[string]int{}
		}
		cuts[ax.Name] = ax.Size / k
	}
	return cuts
}
