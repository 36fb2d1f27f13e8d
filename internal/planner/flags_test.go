package planner

import "flag"

// long runs the long corpora of the property tests (go test ./internal/planner -long);
// by default each runs a shorter seeded prefix of the same corpus.
var long = flag.Bool("long", false, "run the long corpora of the property tests")
