package planner

import "github.com/shardplan/shardplan/internal/sharding"

// newSpaceOf is newSpaceCut without cuts: the tests' space of given shardings.
func newSpaceOf(m *sharding.Mesh, shape []int64, elemBits int, allAxes bool, maxPrime int, shardings ...sharding.Sharding) (*space, bool) {
	return newSpaceCut(m, shape, elemBits, allAxes, maxPrime, nil, shardings...)
}
