package planner

import "github.com/shardplan/shardplan/internal/sharding"

// TransferCount is an upper bound on len(Transfers(m, shape, _, before, after)), without
// building the list: per device, the number of source tiles its target tile meets (each
// transfer a device receives comes from one of them). Cost: O(devices x rank), one
// allocation. Use it to refuse a list that would be too large before building it.
func TransferCount(m *sharding.Mesh, shape []int64, before, after sharding.Sharding) int64 {
	lb := sharding.NewLayout(m, shape, before)
	la := sharding.NewLayout(m, shape, after)
	coords := make([]int, len(m.Axes))
	var total int64
	for pos := range m.NumDevices() {
		m.Coords(pos, coords)
		boxes := int64(1)
		for d := range shape {
			s, e := la.Range(d, la.ShardIndex(d, coords))
			if s >= e {
				boxes = 0
				break
			}
			boxes *= (e-1)/lb.Tile[d] - s/lb.Tile[d] + 1
		}
		total += boxes
	}
	return total
}
