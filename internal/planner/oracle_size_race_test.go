//go:build race

package planner

// oracleCases is the number of seeded reshards TestOracleEquality checks under the race
// detector: a prefix of the corpus the plain run checks in full.
var oracleCases = 150
