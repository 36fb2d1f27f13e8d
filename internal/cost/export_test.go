package cost

// The test helpers the external test package (cost_test) shares with the internal tests.
var (
	TestMesh     = testMesh
	Group        = group
	MustResolve  = mustResolve
	AllKinds     = allKinds
	RandomModels = randomModels
	RandomCase   = randomCase
)
