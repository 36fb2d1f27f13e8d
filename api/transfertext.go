package api

import (
	"fmt"
	"strings"
)

// TransferText is the report of a transfer for a terminal.
func TransferText(t *TransferResponse) string {
	var b strings.Builder
	s := &t.Summary
	fmt.Fprintf(&b, "transfer on %s (%d devices): %d tensors, %s in %d groups\n", t.CostModel, t.FabricDevices, s.Tensors, humanBytes(s.TensorBytes), s.Groups)
	fmt.Fprintf(&b, "strategy %s: %.1f us, bound %.1f us (efficiency %.3f, %s)\n", s.Strategy, s.TimeUS, s.TimeLowerBoundUS, s.TimeEfficiency, s.Optimality)
	fmt.Fprintf(&b, "  bound set by %s; must cross the network: %s\n", s.Bound.Binding, humanBytes(s.Bound.NetworkBytes))
	fmt.Fprintf(&b, "  %d buckets of %s; network %s, nvlink %s; peak %s per device (device %d)\n", s.Buckets, humanBytes(s.BucketBytes),
		humanBytes(s.BytesByLink["ib"]), humanBytes(s.BytesByLink["nvlink"]), humanBytes(s.PeakBytes), s.PeakDevice)
	fmt.Fprintf(&b, "  %s\n\ncandidates:\n", s.Why)
	for _, c := range s.Candidates {
		mark := " "
		if c.Chosen {
			mark = "*"
		}
		fmt.Fprintf(&b, " %s %-7s %12.1f us  network %s  %d buckets  %d messages\n", mark, c.Name, c.TimeUS, humanBytes(c.NetworkBytes), c.Buckets, c.Messages)
	}
	for _, e := range s.Excluded {
		fmt.Fprintf(&b, "   %-7s left out: %s\n", e.Name, e.Reason)
	}
	fmt.Fprintf(&b, "\nphases (every bucket runs through them in order):\n")
	for _, ph := range t.Phases {
		fmt.Fprintf(&b, "  %d  %-30s %-6s network %-10s nvlink %-10s %10.1f us + %.1f us/bucket  bound by %s\n", ph.Phase, strings.Join(ph.Ops, ","), ph.Link,
			humanBytes(ph.NetworkBytes), humanBytes(ph.NVLinkBytes), ph.BandwidthUS, ph.LatencyUSPerBucket, ph.Binding)
	}
	fmt.Fprintf(&b, "\ngroups:\n")
	for _, g := range t.Groups {
		name := g.Tensors[0]
		if len(g.Tensors) > 1 {
			name += fmt.Sprintf(" (+%d)", len(g.Tensors)-1)
		}
		fmt.Fprintf(&b, "  %-40s %v  %s each  %s -> %s  %s %.1f us alone (bound %.1f)\n", name, g.Shape, humanBytes(g.Bytes), g.Source, g.Target, g.Strategy, g.TimeUS, g.TimeLowerBoundUS)
	}
	return b.String()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
