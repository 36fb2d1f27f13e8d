// Package planner finds the collective schedule that moves a tensor from one sharding
// to another on a device mesh, proves each step feasible, prices it with a cost.Model,
// reports it beside the communication lower bounds, and says whether it is proven the
// cheapest.
//
// # Model
//
// Mesh axes are split into atoms: the common refinement of every sub-axis boundary the
// shardings use and, on a GPU model, of the node boundary of an axis that crosses nodes
// (nodecuts.go), split into prime factors. A state is, per tensor dim, an ordered list of
// atoms (major to minor) plus the atoms holding partial sums; atoms in no dim are
// replicated. A plan is a path of states; each edge is one step op of API.md:
//
//	slice              append unused atoms to the minor end of a dim (local, free)
//	all_gather         drop a minor suffix of a dim
//	all_to_all         move a minor suffix of a dim to the minor end of another
//	collective_permute any change that keeps every dim's shard count (routed transfers);
//	                   a halo exchange on an uneven dim before the gather that reads it
//	all_to_all_v       the direct point-to-point exchange between any two states
//	reduce_scatter     reduce pending partial sums and shard a dim over them
//	all_reduce         reduce pending partial sums
//
// On uneven dims a move is kept only if every device's new tile is made of data its
// group held (interval arithmetic per dim), so the ceildiv tiles of API.md hold after
// every step; replay_test.go checks every plan on a symbolic tensor.
//
// # Pipeline
//
// Reshard (plan.go) runs four phases (phases.go), each on what the one before returned:
//
//	problem     newProblem: the atoms of the two ends (newSpace), start and goal, the
//	            reduction of partial sums the target drops (steps.go reduction)
//	incumbents  the plans that need no search, one producer each: the greedy plan
//	            (construct.go; its time bounds the search), the side work on another
//	            goroutine (candidates.go: the lower bounds of bound.go, the direct
//	            candidates all_to_all_v and gather_then_slice, and their hybrids), and
//	            the others (xla.go: strategy xla's plan, when the allowed ops admit it)
//	search      the candidate search (search.go: A* over goal-directed moves,
//	            expand.go, with an admissible heuristic, heuristic*.go, in the passes of
//	            searchPasses, below), which returns its plan and the hybrids of every
//	            plan its passes found (searchOut); the best hybrid (hybrids.go: a
//	            candidate's steps with an all_to_all_v in place of its first, last or
//	            middle steps) and its own hybrids; the late exchange; the chain
//	            candidate (chainincumbent.go: structured steps, one exchange or
//	            permute, structured steps, from Dijkstras over the structured moves
//	            out of the source and into the goal; exhaustive: also each structured
//	            neighbour of either end with the default effort's plans of the legs);
//	            then:
//	  structured  structured.go: the complete pass's engine over unit states (every mesh
//	              axis whole, or split at the sub-axes the ends name) with the
//	              structured moves only, searched to the end (up to
//	              structuredStateLimit states); under structured allowed ops it is what
//	              proves the plan; above the limit, or past the incumbent's budget,
//	              a search for any plan that never replicates the tensor when no
//	              candidate avoids it (cleanStructuredPass)
//	  complete    complete.go: A* over every state of every mesh axis split into prime
//	              atoms, every step op as a move, bounded by the best candidate; it
//	              finds a strictly cheaper plan or proves there is none
//	choose      choose.go: the memory budget, then pickBest: no full rematerialization
//	            first (unless allowed), then time, then fewer collectives, standard
//	            collectives over permutes over exchanges, fewer steps
//
// The tunables of every stage stand in tunables.go, grouped by stage.
// The candidate search and the complete pass (with the structured pass on its engine)
// are two A* engines over one open list, openHeap (search.go). The complete pass's
// engine runs one passConfig per pass (complete.go): its move generator (atomMoves,
// every edge over prime atoms; familyMoves, a large space's hierarchical family;
// unitMoves, the structured moves over units), the weight of its heuristic in the
// queue's order (1: A*; the structured pass's search for a clean plan weighs it
// structuredCleanGreedy), and its budgets of expansions and point-to-point edges.
//
// The candidates before the structured and complete passes are fast heuristics: those
// passes alone decide what is proven (the structured pass only under structured
// allowed ops, over its unit states; structured_oracle_test.go holds it to a Dijkstra
// written apart, and TestChainJudgeStructured to the planner's own chains). It generates every permute and exchange when the states
// number at most completeStateLimit (Summary.Optimality is then OptimalityProven when it
// ends within its budgets); above it, the hierarchical family (OptimalityBestFound): at
// most one structured step from the source (a slice, a gather or all-to-all of any
// suffix, a reduction), an exchange or permute to the goal, to a state one structured
// step before it, or to the goal with free atoms kept (then gathered), at most one more
// to the goal, and the structured step that ends there; where the best candidate is
// latency-bound and far above the lower bound, exchanges chain through several such
// states (the rounds of a hierarchical all-to-all). Its heuristic and edge bounds (the
// data one device lacks over the most it can take in, sampled above 64 devices; the hop
// latency some lacking byte must travel; the peers an exchange's busiest receiver needs;
// the cheapest partition of the pending reductions) are lower bounds on the prices of
// cost.Fabric; oracle_test.go holds the pass to an exhaustive Dijkstra over every pair
// of states, and golden_test.go and BenchmarkChainJudge watch it above that size.
//
// # Search passes
//
// passes walks searchPasses in order; each row sets the searcher's weight (f = g + w·h),
// budget (a share of MaxExpansions), moves and bound. The best plan starts as the greedy
// one; a pass's plan that beats it becomes it.
//
//	pass      w   budget  moves              runs                    bound
//	first     4   1/8     toward goal+swaps  first                   none
//	anytime   4   1/32    relaxed            first found a plan,     strictly below the best
//	                                         effort thorough         plan, tightened by each
//	greedier  16  1/8     relaxed            first found none        none; beats the side
//	                                                                 work's candidates too
//	exact     1   1       toward goal        last; with the anytime  the best plan and the
//	                      (relaxed alone)    pass, from the start    side work's candidates
//	                                         on the side work's      (1.5x them beside the
//	                                         goroutine               others)
//
// The exact pass beside the weighted ones runs on the side work's goroutine once that
// is done; there it builds its plan and prices its hybrids, then the first pass's
// (exchanges in closed form only), and returns them with its plan (exactRun). The
// anytime pass's hybrids are priced on the request's goroutine while the exact pass
// runs. The search collects them into the values it returns (searchPlans.collect). The
// weighted passes need a heuristic and a budget of at least 64.
//
// # Memory
//
// Every plan reports the largest buffer any device holds (Summary.PeakBytesPerDevice).
// Request.MemoryBudget bounds it: the complete pass keeps no state above it, candidates
// above it are dropped, and when no plan fits Reshard returns a *BudgetError with the
// smallest budget that admits one.
//
// # Strategy xla
//
// xla.go emulates XLA's SPMD partitioner (ReshardNoCache's dispatch, halo exchanges in
// xla_halo.go, the replicate-then-partition fallback) on the same states and prices;
// xla_suggest.go searches for the sharding constraints that avoid its fallback.
//
// # Knobs
//
// Request.Effort (fast leaves out the anytime pass; exhaustive widens the structured
// and complete passes, bounded by the planning budget), PlanningBudget (when the
// passes stop and answer their best plan; planningDeadline), MaxExpansions (the
// search's budget), AllowedOps, AllowFullRemat, MemoryBudget. Planning cost depends on the mesh
// rank, the tensor rank and the number of atoms, not on the device count, except for
// the per-device lists a response asks for, the lower bounds, and the complete pass's
// edge bounds (which enumerate devices up to lacksDeviceLimit).
package planner
