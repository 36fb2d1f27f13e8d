package planner

import "flag"

// long runs the long corpora of the property tests (go test ./internal/planner -long);
// by default each runs a shorter seeded prefix of the same corpus.
var long = flag.Bool("long", false, "run the long corpora of the property tests")

// update rewrites the golden files from what the current code produces instead of
// comparing with them: the diagrams under testdata/diagrams (TestSeedDiagrams, …) and
// the chosen plans under testdata/golden (TestGoldenPlans). Run it with -run naming the
// test whose files should change, and review the diff:
//
//	go test ./internal/planner -run TestGoldenPlans -update
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ (diagrams, plans)")
