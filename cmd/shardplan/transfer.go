package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/shardplan/shardplan/api"
)

// transferReport prints a transfer plan (the report, or the raw JSON) and applies the
// gates: the plan's time over maxTimeUS, its time efficiency under minEff (0: off).
func transferReport(stdout, stderr io.Writer, body []byte, asJSON bool, maxTimeUS, minEff float64) int {
	var t api.TransferResponse
	if err := json.Unmarshal(body, &t); err != nil {
		fmt.Fprintf(stderr, "shardplan: the server's answer is not what /v1/transfer returns: %v\n", err)
		return exitServer
	}
	printAnswer(stdout, body, asJSON, func() string { return api.TransferText(&t) })
	var failed []string
	if maxTimeUS > 0 && t.Summary.TimeUS > maxTimeUS {
		failed = append(failed, fmt.Sprintf("transfer time %.2f us exceeds --max-time-us %g", t.Summary.TimeUS, maxTimeUS))
	}
	if minEff > 0 && t.Summary.TimeEfficiency < minEff {
		failed = append(failed, fmt.Sprintf("time efficiency %.4f (bound %.2f us / time %.2f us) is below --min-efficiency %g",
			t.Summary.TimeEfficiency, t.Summary.TimeLowerBoundUS, t.Summary.TimeUS, minEff))
	}
	return gate(stderr, "transfer", failed)
}
