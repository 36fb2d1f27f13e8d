package sharding

// The test helpers the external test package (sharding_test) shares with the internal
// tests.
var (
	MustMesh               = mustMesh
	MustParse              = mustParse
	JSONString             = jsonString
	RequireFieldError      = requireFieldError
	RequireOnlyFieldErrors = requireOnlyFieldErrors
	RequireShardy          = requireShardy
	ExplicitHLO            = explicitHLO
	MustJSON               = mustJSON
)
