// Package planner finds the collective schedule that moves a tensor from one sharding
// to another on a device mesh, proves each step feasible, prices it with a cost.Model,
// and reports it beside the communication lower bound.
//
// # Model
//
// Every mesh axis used by the source or the target is split into atoms: the common
// refinement of every sub-axis boundary both shardings use, further split into prime
// factors, so a plan can move part of an axis (seed 003, case 1). A state is, per tensor
// dim, an ordered list of atoms (major to minor); atoms in no dim are replicated.
//
// The moves are the step ops of API.md:
//
//	slice              append an unused atom to the minor end of a dim (local)
//	all_gather         drop the minor-most atom of a dim
//	all_to_all         move the minor-most atom of one dim to the minor end of another
//	collective_permute any change that keeps every dim's shard count (reorder, swap
//	                   equal-sized atoms between dims, replace an atom by an unused one)
//	reduce_scatter     reduce unreduced axes and shard a dim over them
//	all_reduce         reduce unreduced axes
//	all_to_all_v       the direct point-to-point exchange from tile intersections
//
// Planning reduces partial sums first (reduce_scatter where the target shards over the
// reduced axes; a target may keep a sub-axis of a source unreduced axis), then runs A*
// over states with edges priced by the cost model. collective_permute and all_to_all_v
// steps are priced by their transfers (pattern.go: the holders Pairs and Transfers list,
// routed by cost.Router), permutes lazily (a lower bound when pushed, the routed price
// when popped). The plans that need no search (the greedy plan of construct.go in
// Shardy's order, the direct all_to_all_v, gather-then-slice), when they have no full
// rematerialization, and a weighted pass bound the exact pass: f = g + 4h on strict
// goal-directed moves (an eighth of the budget). When it reaches the goal, an anytime
// pass with the relaxed fills keeps looking for strictly cheaper plans (a thirty-second)
// while the exact pass runs beside it, on another goroutine; when it does not, a
// greedier pass (f = g + 16h, the relaxed fills, an eighth) and then the exact pass run
// in turn. The direct candidates and the plan's time bound are computed beside the
// search too, on a fork of the space; the search waits for them only where it needs
// them (the exact pass's bound), so what a request returns does not depend on timing;
// work whose goroutine has not begun when it is needed is done by the request itself.
// Routers (their memos of permute prices) and the heuristic's group and hop bounds are
// kept across requests on the same model and mesh. The exact pass leaves out the relaxed
// fills and the single-atom swap and replace permutes the weighted passes try. Moves
// are goal-directed (slices and all-to-alls into the dim that ends with the atom, or,
// relaxed, that they fill to its goal count for a permute; a dim's common prefix with
// its goal stays put). At equal time plans prefer fewer collectives, then standard
// collectives over collective_permute over all_to_all_v, then fewer steps. Each plan
// reports the time lower bound of the data it must move (TimeLowerBound). The search
// generates the permutes that put goal atoms in place: swaps
// of equal-sized atoms, replacements by an unused atom, the direct permute when every
// dim has its goal count, and, per dim, the rewrite of that dim as its goal prefix
// followed by its other atoms (which reorders atoms of different sizes, as in Shardy's
// slice, permute, gather for [x]->[y] on x=4,y=6). The heuristic (heuristic.go) is a
// lower bound on the remaining time: the fewest collectives still needed times the
// cheapest collective the model prices, and, when the model has a LowerBound
// (cost.Fabric), the data devices still lack over the best injection bandwidth and, per
// torus axis, the data one half of the ring lacks over the links into it
// (heuristic_cut.go).
// The search prunes states whose local
// buffer would exceed the larger of the source and target tiles and states that are
// fully replicated when neither end is.
// On uneven dims a move is kept only if every device's new tile is made of data its
// group held (checked per dim by interval arithmetic), so the flat ceildiv tiles of
// API.md hold after every step. Consecutive moves of one kind merge into one collective.
// The direct all_to_all_v plan and, as the last resort, gather-everything-then-slice
// are priced beside the search result; the cheapest wins.
//
// Planning cost depends on the mesh rank, the tensor rank and the number of atoms, not
// on the device count, except for the per-device lists a response asks for and the
// lower bound (LowerBoundBetween enumerates the coordinates of the axes either sharding
// uses, once per request).
package planner
