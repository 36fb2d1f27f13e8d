//go:build !race

package planner

// oracleCases is the number of seeded reshards TestOracleEquality checks (about 80 s
// on a 2-vCPU machine; .ci/run runs it without the race detector).
var oracleCases = 2000

// goldenRandomSetCases is how many of the random set's reshards TestGoldenPlans compares:
// all of them.
var goldenRandomSetCases = 250

// structuredOracleCases is how many seeded reshards TestStructuredOracle draws, and how
// many of them it must judge (the others are above its quick size).
var structuredOracleCases, structuredOracleJudged = 600, 560

// structuredOracleStates bounds the structured graphs without permutes
// TestStructuredOracle judges: every graph the structured pass searches.
const structuredOracleStates = structuredStateLimit

// chainJudgeCases is how many reshards TestChainJudgeStructured judges.
var chainJudgeCases = 40

// raceDetector is true under the race detector (sweeps over whole sets are left out
// there).
const raceDetector = false

// noRematCases is how many reshards TestNoAvoidableRemat plans.
var noRematCases = 60
