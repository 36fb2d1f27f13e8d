package planner

import "time"

// The planner's tunables, by stage of the pipeline (doc.go). What each was measured
// against is in docs/PERFORMANCE.md, "Planner tunables"; the structured pass's stand in
// structured.go.

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
