package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/shardplan/shardplan/api"
)

// printHuman prints an answer for people: the result on stdout, and for a violation the
// violations (stdout) before the plan; other problems go to stderr.
func printHuman(stdout, stderr io.Writer, cmd string, status, code int, body []byte) error {
	switch code {
	case exitOK:
		return printResult(stdout, cmd, body, "")
	case exitViolation:
		return printViolation(stdout, cmd, body)
	}
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Status == 0 {
		fmt.Fprintf(stderr, "shardplan: the server answered %d: %s\n", status, strings.TrimSpace(string(body)))
		return nil
	}
	if len(p.Errors) == 0 {
		fmt.Fprintf(stderr, "shardplan: %d %s: %s\n", p.Status, p.Title, p.Detail)
		return nil
	}
	fmt.Fprintf(stderr, "shardplan: %d %s\n", p.Status, p.Title)
	for _, e := range p.Errors {
		fmt.Fprintf(stderr, "  %s: %s\n", e.Field, e.Message)
	}
	return nil
}

// printResult prints an answer; said is what was printed before it (a violation's
// message and fixes), which the answer does not repeat.
func printResult(w io.Writer, cmd string, body []byte, said string) error {
	switch cmd {
	case "reshard":
		var r api.ReshardResponse
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		printReshard(w, &r, said)
	case "graph":
		var g api.GraphResponse
		if err := json.Unmarshal(body, &g); err != nil {
			return err
		}
		printGraph(w, &g, said)
	case "tiles":
		var t api.TilesResponse
		if err := json.Unmarshal(body, &t); err != nil {
			return err
		}
		printTiles(w, &t)
	}
	return nil
}

func printViolation(out io.Writer, cmd string, body []byte) error {
	var p struct {
		Detail               string           `json:"detail"`
		Violations           []api.Violation  `json:"violations"`
		Plan                 json.RawMessage  `json:"plan"`
		SuggestedConstraints []api.Suggestion `json:"suggested_constraints"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return err
	}
	var said strings.Builder
	defer func() { io.WriteString(out, said.String()) }()
	w := &said
	if len(p.Violations) == 0 {
		fmt.Fprintf(w, "POLICY VIOLATION: %s\n", p.Detail)
	} else {
		fmt.Fprintf(w, "POLICY VIOLATION (%d):\n", len(p.Violations))
	}
	for i, v := range p.Violations {
		where := ""
		if v.OpName != "" || v.Tensor != "" {
			where = fmt.Sprintf(" (op %s, tensor %s)", v.OpName, v.Tensor)
		}
		fmt.Fprintf(w, "  %d. %s%s: %s\n", i+1, v.Policy, where, v.Message)
		var sugg []api.Suggestion
		if len(v.SuggestedConstraints) > 0 {
			if err := json.Unmarshal(v.SuggestedConstraints, &sugg); err != nil {
				return err
			}
		}
		if len(sugg) == 0 && len(p.Violations) == 1 {
			sugg = p.SuggestedConstraints
		}
		printSuggestions(w, "     ", sugg, "")
	}
	if len(p.Plan) > 0 {
		fmt.Fprintln(w)
		return printResult(w, cmd, p.Plan, said.String())
	}
	return nil
}

// printSuggestions prints a fix unless said (what was printed before) already holds it.
func printSuggestions(w io.Writer, indent string, sugg []api.Suggestion, said string) {
	if len(sugg) == 0 {
		return
	}
	lines := make([]string, len(sugg))
	for i, s := range sugg {
		lines[i] = shardingLine(s.Sharding)
	}
	if said != "" && strings.Contains(said, "fix: insert these sharding constraints, in order:\n") && containsAll(said, lines) {
		return
	}
	fmt.Fprintf(w, "%sfix: insert these sharding constraints, in order:\n", indent)
	for _, l := range lines {
		fmt.Fprintf(w, "%s  %s\n", indent, l)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// shardingLine prints a sharding as P(...) when it has one, then Shardy and HLO.
func shardingLine(s api.ShardingJSON) string {
	parts := []string{}
	if s.PartitionSpec != "" {
		parts = append(parts, s.PartitionSpec)
	}
	parts = append(parts, s.Text)
	if s.Hlo != "" {
		parts = append(parts, s.Hlo)
	}
	return strings.Join(parts, "  ")
}

// shortSharding is the PartitionSpec when there is one, else Shardy's text.
func shortSharding(s api.ShardingJSON) string {
	if s.PartitionSpec != "" {
		return s.PartitionSpec
	}
	return s.Text
}

func printReshard(w io.Writer, r *api.ReshardResponse, said string) {
	fmt.Fprintf(w, "reshard %v on %s\n", r.Shape, meshString(r.Mesh))
	fmt.Fprintf(w, "  from %s\n  to   %s\n", shardingLine(r.Source), shardingLine(r.Target))
	printSteps(w, "", r.Steps)
	printSummary(w, "", r.Summary)
	if r.XLAWarning != "" && !strings.Contains(said, r.XLAWarning) {
		if r.Summary.FullRematerialization {
			fmt.Fprintf(w, "XLA warning: %s\n", r.XLAWarning)
		} else {
			// XLA logs the same words for a last resort within device groups.
			fmt.Fprintf(w, "XLA warning (XLA's words for any last resort; this one stays within device groups): %s\n", r.XLAWarning)
		}
	}
	printSuggestions(w, "", r.SuggestedConstraints, said)
	if r.Note != "" {
		fmt.Fprintf(w, "note: %s\n", r.Note)
	}
}

func printSteps(w io.Writer, indent string, steps []api.StepJSON) {
	if len(steps) == 0 {
		fmt.Fprintf(w, "%sno steps: the layouts are the same\n", indent)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s  #\top\tmesh axes\tbytes/device\ttime\tafter\n", indent)
	for i, st := range steps {
		fmt.Fprintf(tw, "%s  %d\t%s\t%s\t%s\t%.2f us\t%s\n", indent, i+1, st.Op, strings.Join(st.MeshAxes, ","), bytesString(st.BytesPerDevice), st.TimeUS, shortSharding(st.After))
	}
	tw.Flush()
}

func printSummary(w io.Writer, indent string, s api.SummaryJSON) {
	fmt.Fprintf(w, "%stotal: %s, %.2f us (time bound %.2f us, %.0f%%), %s per device (lower bound %s, efficiency %.0f%%), peak %s; strategy %s, cost model %s; full rematerialization: %s\n",
		indent, api.Count(s.Collectives, "collective"), s.TimeUS, s.TimeLowerBoundUS, 100*s.TimeEfficiency, bytesString(s.BytesPerDevice), bytesString(s.LowerBoundBytesPerDevice), 100*s.Efficiency,
		bytesString(s.PeakBytesPerDevice), s.Strategy, s.CostModel, yesNo(s.FullRematerialization))
	if line := fallbackLine(s.XLAFallback, s.FullRematerialization); line != "" {
		fmt.Fprintf(w, "%s%s\n", indent, line)
	}
	for _, line := range []string{api.XLALine(s), api.OptimalityLine(s)} {
		if line != "" {
			fmt.Fprintf(w, "%s%s\n", indent, line)
		}
	}
}

// yesNo is a flag as the summaries print it: YES stands out, no does not.
func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "no"
}

// fallbackLine says how XLA's last resort runs, in agreement with the full
// rematerialization flag printed above it: over every device (the full
// rematerialization), or within device groups (none).
func fallbackLine(fallback, full bool) string {
	switch {
	case !fallback:
		return ""
	case full:
		return "XLA takes its last resort: every device gathers the whole tensor, then slices out the target"
	}
	return "XLA takes its last resort within device groups: each group gathers its part whole, then slices out the target (no full rematerialization)"
}

func printGraph(w io.Writer, g *api.GraphResponse, said string) {
	fmt.Fprintf(w, "graph on %s: %s\n", meshString(g.Mesh), api.Count(len(g.Shardings), "tensor"))
	ids := make([]string, 0, len(g.Shardings))
	for id := range g.Shardings {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, id := range ids {
		s := g.Shardings[id]
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", id, shortSharding(s), s.Hlo)
	}
	tw.Flush()
	reshards, reductions := 0, 0
	for _, c := range g.Collectives {
		if c.Kind == "reduction" {
			reductions++
		} else {
			reshards++
		}
	}
	if len(g.Collectives) == 0 {
		fmt.Fprintln(w, "communication: none (no reshard, no reduction)")
	} else {
		fmt.Fprintf(w, "communication at %s (%s, %s):\n", api.Count(len(g.Collectives), "site"), api.Count(reshards, "reshard"), api.Count(reductions, "reduction"))
	}
	for i, c := range g.Collectives {
		what := c.Kind
		if c.Reduction != "" {
			what = c.Reduction
		}
		remat := ""
		if c.FullRematerialization {
			remat = "  FULL REMATERIALIZATION"
		}
		fmt.Fprintf(w, "  %d. %s of tensor %s at op %s: %.2f us, %s per device%s\n", i+1, what, c.Tensor, c.OpName, c.TimeUS, bytesString(c.BytesPerDevice), remat)
		if line := fallbackLine(c.XLAFallback, c.FullRematerialization); line != "" {
			fmt.Fprintf(w, "     %s\n", line)
		}
		if c.Plan != nil {
			fmt.Fprintf(w, "     %s -> %s\n", shortSharding(c.Plan.Source), shortSharding(c.Plan.Target))
			printSteps(w, "   ", c.Plan.Steps)
			printSuggestions(w, "     ", c.Plan.SuggestedConstraints, said)
		} else {
			printSteps(w, "   ", c.Steps)
		}
	}
	s := g.Summary
	fmt.Fprintf(w, "total: %s, %.2f us, %s per device; strategy %s, cost model %s; full rematerialization: %s\n",
		api.Count(s.Collectives, "collective"), s.TimeUS, bytesString(s.BytesPerDevice), s.Strategy, s.CostModel, yesNo(s.FullRematerialization))

	if g.Note != "" {
		fmt.Fprintf(w, "note: %s\n", g.Note)
	}
}

func printTiles(w io.Writer, t *api.TilesResponse) {
	fmt.Fprintf(w, "tiles on %s: %s\n", meshString(t.Mesh), shardingLine(t.Sharding))
	fmt.Fprintf(w, "  tile shape %v, %s per device\n", t.TileShape, bytesString(t.TileBytes))
	fmt.Fprintf(w, "  %s\n  %s\n", t.Maps.DeviceToGlobal, t.Maps.GlobalToDevice)
	if t.DevicesOmitted {
		fmt.Fprintf(w, "  device list omitted: %s\n", t.Note)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, d := range t.Devices {
		fmt.Fprintf(tw, "  device %d\tcoords %v\tranges %v\tpadding %v\n", d.Device, d.Coords, d.Ranges, d.Padding)
	}
	tw.Flush()
	for _, l := range t.Locate {
		for _, o := range l.Owners {
			fmt.Fprintf(w, "  t%v is on device %d (coords %v) at local index %v\n", l.Index, o.Device, o.Coords, o.LocalIndex)
		}
	}
}

func meshString(m api.MeshObject) string {
	parts := make([]string, len(m.Axes))
	for i, a := range m.Axes {
		parts[i] = fmt.Sprintf("%s=%d", a.Name, a.Size)
	}
	return "@" + m.Name + " [" + strings.Join(parts, ",") + "]"
}

// bytesString prints a byte count in binary units.
func bytesString(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	v, u := float64(b), "B"
	for _, next := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, u = v/unit, next
	}
	return fmt.Sprintf("%.1f %s", v, u)
}
