// Package collective names the collectives, once. The values are the op names of
// API.md's steps and of XLA's HLO (all_gather, all_to_all, ...); cost prices them
// (cost.Kind), the planner's steps are them or a local slice (planner.Op), and
// propagation's reductions are two of them. It is a leaf with no imports, so that
// propagation, which prices nothing, need not import cost for two names.
package collective

// Kind is a collective.
type Kind string

// The collectives.
const (
	AllGather         Kind = "all_gather"
	ReduceScatter     Kind = "reduce_scatter"
	AllReduce         Kind = "all_reduce"
	AllToAll          Kind = "all_to_all"
	CollectivePermute Kind = "collective_permute"
	AllToAllV         Kind = "all_to_all_v"
)

// All lists every collective.
var All = []Kind{AllGather, ReduceScatter, AllReduce, AllToAll, CollectivePermute, AllToAllV}
