package api

import (
	"fmt"
	"strings"
)

// AuditText renders an audit for a person in a terminal: totals, the dearest sites with
// their source lines, the memory peak, and the remats with their fixes. The server
// answers it to Accept: text/plain and the CLI prints it.
func AuditText(a *AuditResponse) string {
	var b strings.Builder
	t := a.Totals
	what := "program"
	if a.Input == "compiled" {
		what = "compiled module"
	}
	fmt.Fprintf(&b, "audit of a %s on mesh %s, cost model %s", what, meshText(a.Mesh), a.CostModel)
	if a.Strategy != "" {
		fmt.Fprintf(&b, ", strategy %s", a.Strategy)
	}
	b.WriteString("\n")
	if a.MeshSource != "" && a.MeshSource != "request" {
		fmt.Fprintf(&b, "mesh: %s (give --mesh to use another)\n", a.MeshNote)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "communication: %s over %s, %s per device; top 10 sites: %s (%.0f%%)\n",
		us(t.TimeUS), Count(t.Sites, "site"), byteSize(t.BytesPerDevice), us(t.Top10TimeUS), 100*t.Top10Share)
	if t.StepUS != nil {
		fmt.Fprintf(&b, "step: %s estimated over the schedule: compute %s, communication exposed %s (hidden behind compute %s)\n",
			us(*t.StepUS), us(deref(t.ComputeUS)), us(deref(t.ExposedUS)), us(deref(t.OverlappedUS)))
		if a.Roofline != nil {
			fmt.Fprintf(&b, "compute roofline: %g TFLOP/s bf16, %g GB/s HBM\n", a.Roofline.PeakBF16TFLOPS, a.Roofline.HBMGBps)
		}
		if t.Measured > 0 {
			fmt.Fprintf(&b, "measured: %s priced from the profile\n", Count(t.Measured, "instruction"))
		}
		for _, n := range a.ScheduleNotes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
		if len(a.ProfileUnmatched) > 0 {
			fmt.Fprintf(&b, "note: the profile names %s the module lacks, first %s\n", Count(len(a.ProfileUnmatched), "instruction"), a.ProfileUnmatched[0])
		}
	}
	if len(t.ByExposed) > 0 {
		b.WriteString("\nthe step waits on:\n")
		fmt.Fprintf(&b, "  %4s  %12s  %12s  %5s  %s\n", "rank", "exposed", "hidden", "site", "what")
		for _, e := range t.ByExposed {
			what := "%" + e.Op
			if s := a.Sites[e.Site-1]; s.MeasuredUS != nil {
				what += fmt.Sprintf(" (measured %s, model %s)", us(*s.MeasuredUS), us(s.TimeUS))
			}
			fmt.Fprintf(&b, "  %4d  %12s  %12s  %5s  %s\n", e.Rank, us(e.ExposedUS), us(e.OverlappedUS), fmt.Sprintf("#%d", e.Site), what)
		}
	}
	if len(a.Sites) > 0 {
		b.WriteString("\ntop sites:\n")
		fmt.Fprintf(&b, "  %4s  %12s  %12s  %-34s  %s\n", "rank", "time", "bytes/device", "where", "what")
		for _, s := range a.Sites[:min(len(a.Sites), 10)] {
			fmt.Fprintf(&b, "  %4d  %12s  %12s  %-34s  %s\n", s.Rank, us(s.TimeUS), byteSize(s.BytesPerDevice), where(s.Location), siteWhat(&s))
			if s.Note != "" {
				fmt.Fprintf(&b, "        note: %s\n", s.Note)
			}
			if s.TripCountNote != "" {
				fmt.Fprintf(&b, "        note: %s\n", s.TripCountNote)
			}
		}
		shown, more := 0, 0
		for _, s := range a.Sites[min(len(a.Sites), 10):] {
			switch {
			case s.Note == "":
			case shown < 5:
				fmt.Fprintf(&b, "  #%d %%%s: %s\n", s.Rank, s.Op, s.Note)
				shown++
			default:
				more++
			}
		}
		if more > 0 {
			fmt.Fprintf(&b, "  and %s with notes (the JSON answer's sites[].note)\n", Count(more, "more site"))
		}
	}
	if len(a.Unmodeled) > 0 {
		fmt.Fprintf(&b, "\nUNMODELED: %s communicating without a price (not in the totals):\n", Count(len(a.Unmodeled), "instruction"))
		for _, u := range a.Unmodeled {
			fmt.Fprintf(&b, "  line %d: %s %%%s: %s\n", u.Line, u.Opcode, u.Name, u.Reason)
		}
	}
	if m := a.Memory; m != nil {
		fmt.Fprintf(&b, "\nmemory: peak %s per device at op %s", byteSize(m.PeakBytesPerDevice), m.PeakOp)
		if w := where(m.PeakLocation); w != "-" {
			fmt.Fprintf(&b, " (%s)", w)
		}
		fmt.Fprintf(&b, "; arguments and results hold %s\n", byteSize(m.HeldBytesPerDevice))
		if m.MemoryBudgetBytesPerDevice != nil {
			if m.OverBudget {
				fmt.Fprintf(&b, "OVER BUDGET: %s %s per device, first %s\n", Count(m.OverBudgetCount, "op"), exceeds(m.OverBudgetCount, byteSize(*m.MemoryBudgetBytesPerDevice)), m.OverBudgetOps[0])
			} else {
				fmt.Fprintf(&b, "within the budget of %s per device\n", byteSize(*m.MemoryBudgetBytesPerDevice))
			}
		}
	}
	switch {
	case a.Input == "compiled":
		fmt.Fprintf(&b, "\nfull rematerializations: %d\n", len(a.Remats))
		for _, r := range a.Remats {
			fmt.Fprintf(&b, "  line %d: %s make %%%s", r.Line, strings.Join(prefixAll(r.Gathers, "%"), ", "), r.Source)
			if r.SourcePartitionSpec != "" {
				fmt.Fprintf(&b, " %s", r.SourcePartitionSpec)
			}
			fmt.Fprintf(&b, " whole (%v) on every device, then %%%s slices it: %s, %s per device\n", r.Shape, r.Slice, us(r.TimeUS), byteSize(r.BytesPerDevice))
			if r.Plan != nil && r.SavedUS != nil {
				fmt.Fprintf(&b, "    shardplan: %s -> %s in %s (%s), saving %s\n", orText(r.SourcePartitionSpec, r.Plan.Source), orText(r.TargetPartitionSpec, r.Plan.Target),
					us(r.Plan.Summary.TimeUS), Count(len(r.Plan.Steps), "step"), us(*r.SavedUS))
			}
			if r.Plan == nil && r.Note != "" {
				fmt.Fprintf(&b, "    no plan beside: %s\n", r.Note)
			}
			if len(r.SuggestedConstraints) > 0 {
				b.WriteString("    fix: insert these sharding constraints, in order:")
				for _, sc := range r.SuggestedConstraints {
					fmt.Fprintf(&b, " %s", suggestionText(sc))
				}
				b.WriteString("\n")
			}
		}
	default:
		fmt.Fprintf(&b, "\nXLA full rematerializations: %d\n", len(t.XLARemats))
		for _, r := range t.XLARemats {
			fmt.Fprintf(&b, "  #%d tensor %s at op %s%s\n", r.Rank, r.Tensor, r.Op, at(r.Location))
			switch {
			case len(r.SuggestedConstraints) > 0:
				b.WriteString("    fix: insert these sharding constraints, in order:")
				for _, sc := range r.SuggestedConstraints {
					fmt.Fprintf(&b, " %s", suggestionText(sc))
				}
				b.WriteString("\n")
			case r.SuggestionNote != "":
				fmt.Fprintf(&b, "    no fix: %s\n", r.SuggestionNote)
			}
		}
	}
	return b.String()
}

func siteWhat(s *AuditSite) string {
	switch {
	case s.Kind == "reshard" && s.Plan != nil:
		w := fmt.Sprintf("reshard of tensor %s at op %s: %s -> %s", s.Tensor, s.Op, shardingText(s.Plan.Source), shardingText(s.Plan.Target))
		switch {
		case s.XLAFullRematerialization:
			w += " [XLA REMAT]"
		case s.FullRematerialization:
			w += " [REMAT]"
		}
		return w
	case s.Kind == "reduction":
		return fmt.Sprintf("%s of tensor %s at op %s%s", s.Reduction, s.Tensor, s.Op, overAxes(s.Axes))
	}
	w := fmt.Sprintf("%s %%%s", s.Kind, s.Op)
	switch {
	case len(s.Axes) > 0:
		w += " over (" + strings.Join(s.Axes, ",") + ")"
	case s.Note != "":
		w += " over its device groups"
	}
	if s.TripCount > 1 {
		w += fmt.Sprintf(" x%d runs", s.TripCount)
	}
	if s.FullRematerialization {
		w += " [REMAT]"
	}
	return w
}

func where(l AuditLocation) string {
	switch {
	case l.File != "" && l.Function != "":
		return fmt.Sprintf("%s:%d (%s)", l.File, l.Line, l.Function)
	case l.File != "":
		return fmt.Sprintf("%s:%d", l.File, l.Line)
	case l.OpName != "":
		return l.OpName
	case l.ModuleLine > 0:
		return fmt.Sprintf("module line %d", l.ModuleLine)
	}
	return "-"
}

// overAxes is " over x,y", or nothing for no axes.
func overAxes(axes []string) string {
	if len(axes) == 0 {
		return ""
	}
	return " over " + strings.Join(axes, ",")
}

// at is " at file:line" (or the op name, or the module line), or nothing without a
// location.
func at(l AuditLocation) string {
	if w := where(l); w != "-" {
		return " (" + w + ")"
	}
	return ""
}

// exceeds is "exceeds limit" after one, "exceed limit" after several.
func exceeds(n int, limit string) string {
	if n == 1 {
		return "exceeds " + limit
	}
	return "exceed " + limit
}

// orText is a PartitionSpec, or the sharding's own text when there is none.
func orText(spec string, s ShardingJSON) string {
	if spec != "" {
		return spec
	}
	return shardingText(s)
}

func shardingText(s ShardingJSON) string {
	if s.PartitionSpec != "" {
		return s.PartitionSpec
	}
	return s.Text
}

func suggestionText(sc Suggestion) string {
	if sc.PartitionSpec != "" {
		return sc.PartitionSpec
	}
	return sc.Sharding.Text
}

func meshText(m MeshObject) string {
	parts := make([]string, len(m.Axes))
	for i, a := range m.Axes {
		parts[i] = fmt.Sprintf("%s=%d", a.Name, a.Size)
	}
	return strings.Join(parts, ",")
}

func prefixAll(ss []string, p string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

func us(t float64) string { return fmt.Sprintf("%.2f us", t) }

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// byteSize prints n bytes with a binary unit.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
