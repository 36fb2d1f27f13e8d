// Command shardplan is the command-line client of the shardplan service, for CI gates and
// shells:
//
//	shardplan [flags] reshard|graph|tiles|audit FILE|-
//
// It posts FILE (or standard input) to POST /v1/<command> of the server given by
// --server (or SHARDPLAN_SERVER), or, with neither, answers in-process with the
// service's embedded defaults. It prints the plan summary, policy violations and
// suggested constraints for people, or the raw response with --json; audit prints the
// program audit's report and gates on remats, a memory budget or a time threshold. Exit
// status: 0 success, 1 policy violation (HTTP 422 policy-violation) or a failed audit
// gate, 2 bad input or usage, 3 server or transport error.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
