//go:build !race

package planner

// oracleCases is the number of seeded reshards TestOracleEquality checks (about 80 s
// on a 2-vCPU machine; .ci/run runs it without the race detector).
var oracleCases = 2000

// goldenRandomSetCases is how many of the random set's reshards TestGoldenPlans compares:
// all of them.
var goldenRandomSetCases = 250
