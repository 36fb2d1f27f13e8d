package cost

import "context"

// The test helpers the external test package (cost_test) shares with the internal tests.
var (
	TestMesh     = testMesh
	Group        = group
	MustResolve  = mustResolve
	AllKinds     = allKinds
	RandomModels = randomModels
	RandomCase   = randomCase
)

// Fit is FitContext without a deadline.
func Fit(ms []Measurement, base ProfileInfo) (ProfileInfo, []PointError, error) {
	return FitContext(context.Background(), ms, base)
}
