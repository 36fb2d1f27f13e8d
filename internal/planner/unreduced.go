package planner

import (
	"fmt"

	"github.com/shardplan/shardplan/internal/sharding"
)

// reducedRefs is what a reshard from src to tgt must reduce: src's unreduced axes less
// the parts tgt keeps unreduced. tgt may keep a whole unreduced axis of src or a
// sub-axis of one (x=4 unreduced, target unreduced x:(2)2: reduce x:(1)2 and keep the
// rest as partial sums); it may never add partial sums the source does not hold.
func reducedRefs(src, tgt sharding.Sharding) ([]sharding.AxisRef, error) {
	for i, u := range tgt.Unreduced {
		covered := false
		for _, s := range src.Unreduced {
			covered = covered || s.Contains(u)
		}
		if !covered {
			return nil, sharding.Fieldf(fmt.Sprintf("target.unreduced[%d]", i), "the source holds no partial sums over %q; a reshard cannot create them (drop it from target.unreduced, or make it, or an axis containing it, unreduced in the source)", u.String())
		}
	}
	var out []sharding.AxisRef
	for _, s := range src.Unreduced {
		// The pieces of s no kept ref covers, as sub-axes [lo, hi) of the axis'
		// factor range.
		pieces := [][2]int{{s.Pre, s.Next()}}
		for _, u := range tgt.Unreduced {
			if !s.Overlaps(u) {
				continue
			}
			var next [][2]int
			for _, p := range pieces {
				if u.Next() <= p[0] || u.Pre >= p[1] {
					next = append(next, p)
					continue
				}
				if u.Pre > p[0] {
					next = append(next, [2]int{p[0], u.Pre})
				}
				if u.Next() < p[1] {
					next = append(next, [2]int{u.Next(), p[1]})
				}
			}
			pieces = next
		}
		for _, p := range pieces {
			if p[1] > p[0] {
				out = append(out, s.Sub(p[0], p[1]/p[0]))
			}
		}
	}
	return out, nil
}
