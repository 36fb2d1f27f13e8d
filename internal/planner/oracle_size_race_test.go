//go:build race

package planner

// oracleCases is the number of seeded reshards TestOracleEquality checks under the race
// detector: a prefix of the corpus the plain run checks in full.
var oracleCases = 50

// goldenRandomSetCases is how many of the random set's reshards TestGoldenPlans compares
// under the race detector: a prefix of the set the plain run compares in full.
var goldenRandomSetCases = 12

// structuredOracleCases is TestStructuredOracle's draw under the race detector: a
// prefix of the plain run's, and how many of it must be judged.
var structuredOracleCases, structuredOracleJudged = 120, 100

// structuredOracleStates bounds the structured graphs without permutes
// TestStructuredOracle judges under the race detector: 4 units at rank 3, 5 at rank 2.
const structuredOracleStates = 2000

// chainJudgeCases is TestChainJudgeStructured's cases under the race detector: a
// prefix of the plain run's.
var chainJudgeCases = 8

// raceDetector is true under the race detector: sweeps over whole sets, which CI's
// plain planner step runs, are left out there.
const raceDetector = true

// noRematCases is how many reshards TestNoAvoidableRemat plans under the race detector: a prefix of the plain run's.
var noRematCases = 10
