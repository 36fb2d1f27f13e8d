package api

import (
	"fmt"
	"math"
	"strings"
)

// XLALine compares a plan with XLA's, when the answer priced XLA's plan (a candidate
// named "xla", as strategy optimal runs it): XLA's time beside the plan's and how many
// times faster the plan is, or "XLA already does this" when XLA's plan is the chosen one
// or has as many steps and the same time. "" when no XLA candidate was priced (strategy
// xla, whose plan is XLA's, or a strategy that does not run it).
func XLALine(s SummaryJSON) string {
	var xla, chosen *Candidate
	for i := range s.Candidates {
		c := &s.Candidates[i]
		if c.Name == "xla" && xla == nil {
			xla = c
		}
		if c.Chosen && chosen == nil {
			chosen = c
		}
	}
	if xla == nil {
		return ""
	}
	same := xla.Chosen || (chosen != nil && xla.Steps == chosen.Steps && sameTime(xla.TimeUS, s.TimeUS))
	if same {
		return fmt.Sprintf("XLA already does this (same steps, %.2f us)", s.TimeUS)
	}
	head := fmt.Sprintf("XLA (strategy xla): %.2f us; this plan %.2f us", xla.TimeUS, s.TimeUS)
	switch {
	case sameTime(xla.TimeUS, s.TimeUS):
		return head + ", the same time in other steps"
	case xla.TimeUS > s.TimeUS:
		return head + ", " + timeApart(xla.TimeUS, s.TimeUS, "faster", "less")
	}
	// XLA's plan breaks a rule of the request (the allowed ops, the memory budget or the
	// full rematerialization rule), or the search's budget ended first.
	return head + ", " + timeApart(s.TimeUS, xla.TimeUS, "slower", "more") + " (XLA's plan is outside this request's rules, or the search's budget ended)"
}

// timeApart says how far apart two prices are, hi > lo: as a ratio ("5.86x faster"), or
// under 1% apart as the difference ("0.00078 us less, under 1%").
func timeApart(hi, lo float64, ratioWord, diffWord string) string {
	if lo > 0 && hi/lo >= 1.01 {
		return fmt.Sprintf("%.2fx %s", hi/lo, ratioWord)
	}
	return fmt.Sprintf("%.2g us %s, under 1%%", hi-lo, diffWord)
}

// sameTime: two prices agree to a part in a billion.
func sameTime(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b))
}

// OptimalityLine explains a summary's certificate beside the time bound: "proven" holds
// under the allowed ops and the cost model, while the bound counts any schedule, so a
// proven plan may sit well above it; "best_found" says how far above the bound the plan
// is. "" when the strategy gives no certificate.
func OptimalityLine(s SummaryJSON) string {
	bound, meets := "", false
	if s.TimeLowerBoundUS > 0 && s.TimeUS > 0 {
		bound = fmt.Sprintf("the bound (%.2f us, %.0f%% of the plan's time)", s.TimeLowerBoundUS, 100*s.TimeLowerBoundUS/s.TimeUS)
		meets = s.TimeUS <= s.TimeLowerBoundUS*(1+1e-9)
	}
	switch {
	case s.Optimality == "proven" && meets:
		return fmt.Sprintf("optimality: proven optimal under the allowed ops, and the plan meets the time bound (%.2f us), which counts any schedule", s.TimeLowerBoundUS)
	case s.Optimality == "proven" && bound != "":
		return "optimality: proven optimal under the allowed ops; " + bound + " counts any schedule, so a gap does not mean a cheaper plan exists"
	case s.Optimality == "proven":
		return "optimality: proven optimal under the allowed ops (no plan of these ops is cheaper on this cost model)"
	case s.Optimality == "best_found" && meets:
		return fmt.Sprintf("optimality: best found (the search's budget ended), yet the plan meets the time bound (%.2f us), which counts any schedule: none is cheaper", s.TimeLowerBoundUS)
	case s.Optimality == "best_found" && bound != "":
		return fmt.Sprintf("optimality: best found (the search's budget ended); %.2f us above %s, which counts any schedule; a cheaper plan of these ops may exist", s.OptimalityGapUS, bound)
	case s.Optimality == "best_found":
		return "optimality: best found (the search's budget ended)"
	}
	return ""
}

// ReshardTextSummary is what the text answer of a reshard prints under its diagram: the
// plan's totals, XLA's price beside it and its optimality.
func ReshardTextSummary(s SummaryJSON) string {
	var b strings.Builder
	fmt.Fprintf(&b, "total: %s, %.2f us (time bound %.2f us, %.0f%%); strategy %s, cost model %s\n",
		Count(s.Collectives, "collective"), s.TimeUS, s.TimeLowerBoundUS, 100*s.TimeEfficiency, s.Strategy, s.CostModel)
	for _, line := range []string{XLALine(s), OptimalityLine(s)} {
		if line != "" {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
