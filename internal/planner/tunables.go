package planner

import "time"

// The planner's tunables, by stage of the pipeline (doc.go). What each was measured
// against is in docs/PERFORMANCE.md, "Planner tunables" and "The structured pass".

// Budgets a request may override.
const (
	// DefaultMaxExpansions bounds the states the candidate search's exact pass expands (Request.MaxExpansions).
	DefaultMaxExpansions = 4000
	// DefaultExhaustiveBudget is EffortExhaustive's planning budget when the request names none.
	DefaultExhaustiveBudget = 2 * time.Second
)

// Problem: the atoms of the search space.
const (
	maxPrimeAtoms = 10 // prime-splitting stops at this many atoms (newSpace); above, coarser atoms
	// reductionPartitionAtoms bounds the pending reductions the complete pass's heuristic
	// partitions exactly (3^n step prices); above, it bounds them by 0.
	reductionPartitionAtoms = 12
)

// Incumbents: the direct exchanges the side work and the late exchange route.
const (
	maxOptionalTransfers = 1 << 15               // the direct exchange is left out past this many transfers when another clean plan exists
	maxDirectTransfers   = 1 << 20               // ... and past this many whenever gather-then-slice stands in
	maxLateTransfers     = 1 << 24               // lateExchange routes at most this many transfers
	lateTransferCost     = 200 * time.Nanosecond // lateExchange's budget per transfer against the request's deadline
	maxNearestTransfers  = 1 << 15               // exchanges past this many transfers keep the spread holders unless both price in closed form
	maxHybridTransfers   = 1 << 12               // hybridOf routes at most this many transfers per exchange (closed forms at any size)
)

// Candidate search: its passes (f = g + weight·h, a share of MaxExpansions each), their
// moves, and the exact pass's slack.
var searchPasses = [...]searchPass{
	{name: "first", weight: 4, share: 8, moves: goalSwapMoves, bound: boundNone, when: runFirst, hand: handToExact},
	{name: "anytime", weight: 4, share: 32, moves: relaxedMoves, bound: boundCheaper, when: runOnPlan, hand: handOffer},
	{name: "greedier", weight: 16, share: 8, moves: relaxedMoves, bound: boundNone, side: true, when: runOnNoPlan, hand: handNone},
	{name: "exact", weight: 1, share: 1, moves: goalMoves, bound: boundBest, side: true, slack: exactBoundSlack, when: runLast, hand: handNone},
}

var (
	goalMoves     = moveSet{wholeGathers: true}              // strictly toward the goal: no swaps, no fills, whole gathers only
	goalSwapMoves = moveSet{swaps: true, wholeGathers: true} // goalMoves with the swaps and replacements of single atoms
	relaxedMoves  = moveSet{swaps: true, relax: true}        // with the fills and the gathers of part of a suffix
)

const (
	exactBoundSlack = 1.5     // the exact pass beside the anytime pass prunes at this times the cheapest other plan
	maxPooledStates = 1 << 14 // memoPool keeps no search tables larger than this
)

// Heuristic: the search's lower bounds (heuristic*.go, bound.go).
const (
	maxBoundAtoms   = 10      // newBound probes every group up to this many atoms; above, no heuristic
	hopShare        = 50      // the hop bound is left out where the bandwidth bound is over this times its most
	maxHopConfigs   = 16      // coupling assignments the hop bound enumerates per component
	maxHopTableWork = 1 << 16 // hop distances one table may enumerate; past it the table is 0
	cutBoundDevices = 1024    // coordinates the cut and node bounds enumerate; past it they leave that part out
)

// Chain candidate (chainincumbent.go): per side the structured steps from its end
// (depth) and the states kept, nearest first (states); the goal's side's nearest
// states whose keep targets are priced (bases); the exchanges priced (pairs).
// EffortExhaustive takes the wider row, and at most chainBudgetShare of its planning
// budget for its chain phase.
var (
	chainDefault    = chainBudget{depth: 3, states: 16, bases: 4, pairs: 48}
	chainExhaustive = chainBudget{depth: 3, states: 192, bases: 32, pairs: 4096}
)

const (
	chainPopsPerPair = 16  // the pairs the chain candidate bounds (exchangeBound) per exchange it may price
	chainBudgetShare = 0.5 // the share of EffortExhaustive's planning budget its chain phase may take
)

// Structured pass (structured.go): the unit states it searches, its budgets, and the
// weight of its search for a clean plan.
// structuredStateLimit bounds the unit states per unreduced set the structured pass
// searches: 5 units at rank 3 (5,056 states), 6 at rank 2 (11,743). 6 units at rank 3
// (42,079) are above it: a pass there expands 2,000-20,000 nodes, seconds without
// permutes and about 15 s with them (docs/PERFORMANCE.md, "The structured pass").
const structuredStateLimit = 12000

// structuredExpansions and structuredP2PPerState bound one structured pass: the nodes it
// expands, and the permutes it routes per unit state of its graph (a digit permutation
// is routed once per request for each bytes per device; proving a pass over 1,631 states
// routes up to 5,213, over 5,056 states up to 16,120). A pass that reaches either answers
// its best plan found, not proven.
const (
	structuredExpansions  = 60000
	structuredP2PPerState = 8
)

// structuredCleanGreedy weighs the heuristic in cleanStructuredPass's search, which looks
// for any plan that avoids a full rematerialization, not the cheapest: on the graphs above
// structuredStateLimit of TestNoAvoidableRemat a weight of 1 took up to 46 s, 10 up to
// 4 s, 1,000 a few milliseconds (at most 0.8 s).
const structuredCleanGreedy = 1000

// structuredIncumbentExpansions bounds the structured pass when the request allows
// exchanges (its plan is then one incumbent among the exchange families').
const structuredIncumbentExpansions = 256

// Complete pass (complete.go).
const (
	completeStateLimit      = 400   // states up to which every permute and exchange is generated
	exhaustiveStateLimit    = 20000 // completeStateLimit under EffortExhaustive
	exhaustiveScale         = 16    // EffortExhaustive's factor on the expansion and point-to-point budgets
	completeMaxPrime        = 24    // prime atoms of the complete pass's space
	completeExpansions      = 20000 // nodes one pass expands
	completeP2PBudget       = 6000  // point-to-point edges one pass prices (each routes its transfers)
	completeLargeExpansions = 256   // nodes a pass over a large space expands
	completeLargeP2PBudget  = 192   // point-to-point edges a pass over a large space prices; past it, structured moves only
	completeLargeSliceAtoms = 1     // atoms one slice appends where not every move is generated
	completeWideGap         = 16    // the best plan's time over its lower bound above which a large space's pass searches the wide family
	completeWideP2PBudget   = 256   // point-to-point edges the wide family prices
	lacksDeviceLimit        = 64    // meshes up to this many devices have lacks enumerate every device
	boundSamples            = 8     // devices sampledLack looks at above lacksDeviceLimit
)
