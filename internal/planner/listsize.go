package planner

import "github.com/shardplan/shardplan/internal/sharding"

// TransferCount is an upper bound on len(Transfers(m, shape, _, before, after)), without
// building the list: per device, the number of source tiles its target tile meets (each
// transfer a device receives comes from one of them). A device's count is the product
// over dims of the source tiles its dim's range meets, and every combination of target
// shard indices is held by as many devices (NumDevices over the shard counts' product),
// so the sum over devices is that many times the product over dims of each dim's sum over
// its shard indices. Cost: O(sum of the target's shard counts). Use it to refuse a list
// that would be too large before building it.
func TransferCount(m *sharding.Mesh, shape []int64, before, after sharding.Sharding) int64 {
	lb := sharding.NewLayout(m, shape, before)
	la := sharding.NewLayout(m, shape, after)
	total := int64(m.NumDevices())
	for d := range shape {
		total /= int64(la.Counts[d])
	}
	for d := range shape {
		var met int64
		for j := range la.Counts[d] {
			if s, e := la.Range(d, j); s < e {
				met += (e-1)/lb.Tile[d] - s/lb.Tile[d] + 1
			}
		}
		total *= met
	}
	return total
}
