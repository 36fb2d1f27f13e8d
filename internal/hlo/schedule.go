package hlo

import (
	"context"
	"fmt"
	"strings"

	"github.com/shardplan/shardplan/internal/cost"
)

// ScheduleOptions say how Schedule prices what runs between the collectives.
type ScheduleOptions struct {
	// Roofline prices compute ops (nil: compute costs nothing and every collective is
	// exposed).
	Roofline *cost.Roofline
	// Measured are measured costs in microseconds per run, by instruction name (an
	// async pair's -start or -done); they replace the modelled price of the
	// instructions they name.
	Measured map[string]float64
}

// Exposure is how one collective's time splits over the step: ExposedUS the step
// waits on it, OverlappedUS runs behind compute scheduled between its start and done.
// Both count every run. MeasuredUS is its measured cost over every run when the
// profile names it (Measured).
type Exposure struct {
	ExposedUS, OverlappedUS float64
	Measured                bool
	MeasuredUS              float64
}

// Schedule is a module's step walked in its printed (scheduled) order: compute priced
// by the roofline, collectives by the cost model (or the profile), each async
// collective's -done waiting for what the compute since its -start has not hidden.
type Schedule struct {
	// StepUS = ComputeUS + ExposedUS: the step's estimated time. OverlappedUS is the
	// communication hidden behind compute.
	StepUS, ComputeUS, ExposedUS, OverlappedUS float64
	// Sites are the collectives' exposures, by index in Analysis.Collectives.
	Sites []Exposure
	// MeasuredInstructions counts the instructions priced from the profile;
	// UnmatchedProfile the profile's names no instruction of the module bears.
	MeasuredInstructions int
	UnmatchedProfile     []string
	// Notes say what the figures leave out.
	Notes []string
}

// maxScheduleDepth bounds the nesting of calls and loops Schedule follows.
const maxScheduleDepth = 64

type pending struct {
	name string
	idx  int
	at   float64
	cost float64
}

type scheduleWalker struct {
	a    *Analysis
	opts ScheduleOptions
	out  *Schedule
	// colls indexes the collectives by computation/name.
	colls   map[string]int
	seen    []bool
	used    map[string]bool
	steps   int
	ctx     context.Context
	walking map[*Computation]bool
}

// Schedule walks the entry computation in its printed order (a scheduled module prints
// its schedule): a compute op takes its roofline time (dot and convolution FLOPs at
// the peak, every op's bytes at the HBM bandwidth, the longer of the two); a
// synchronous collective its whole price; an async one (-start/-done, async-start of
// a wrapped collective, send-start) starts a clock at its start, and its done waits
// for what remains of its price once the compute scheduled in between has run.
// Loops multiply their body by their trip count; calls run their computation;
// a conditional's branches count at their mean. Collectives the walk does not reach
// are counted exposed.
func (a *Analysis) Schedule(ctx context.Context, opts ScheduleOptions) (*Schedule, error) {
	w := &scheduleWalker{a: a, opts: opts, out: &Schedule{Sites: make([]Exposure, len(a.Collectives))},
		colls: map[string]int{}, seen: make([]bool, len(a.Collectives)), used: map[string]bool{}, ctx: ctx, walking: map[*Computation]bool{}}
	for i := range a.Collectives {
		c := &a.Collectives[i]
		w.colls[c.Computation+"/"+c.Name] = i
	}
	t, err := w.walk(a.Module.Entry, 1, 0)
	if err != nil {
		return nil, err
	}
	s := w.out
	unreached := 0
	for i := range a.Collectives {
		if !w.seen[i] {
			unreached++
			tu := w.collectiveCost(i, "") * float64(max(a.Collectives[i].TripCount, 1))
			s.Sites[i].ExposedUS += tu
			s.ExposedUS += tu
			t += tu
		}
	}
	if unreached > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d collectives are not on the entry computation's schedule (in computations it does not call): counted exposed", unreached))
	}
	if opts.Roofline == nil {
		s.Notes = append(s.Notes, "the cost model has no compute roofline: compute is priced at 0 and every collective is exposed")
	}
	for name := range opts.Measured {
		if !w.used[name] {
			s.UnmatchedProfile = append(s.UnmatchedProfile, name)
		}
	}
	sortStrings(s.UnmatchedProfile)
	s.StepUS = t
	return s, nil
}

func sortStrings(ss []string) {
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && ss[j] < ss[j-1]; j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
}

// measured returns the profile's cost of the first of names it holds.
func (w *scheduleWalker) measured(names ...string) (float64, bool) {
	for _, n := range names {
		if n == "" {
			continue
		}
		if v, ok := w.opts.Measured[n]; ok {
			w.used[n] = true
			return v, true
		}
	}
	return 0, false
}

// collectiveCost is one run of collective i: the profile's cost under its own name or
// startName, else the model's price.
func (w *scheduleWalker) collectiveCost(i int, startName string) float64 {
	c := &w.a.Collectives[i]
	if v, ok := w.measured(startName, c.Name); ok {
		if !w.out.Sites[i].Measured {
			w.out.MeasuredInstructions++
		}
		w.out.Sites[i].Measured = true
		w.out.Sites[i].MeasuredUS = v * float64(max(c.TripCount, 1))
		return v
	}
	return c.Cost.TimeUS
}

func (w *scheduleWalker) record(p pending, wait, mult float64) {
	if p.idx < 0 {
		return
	}
	wait = min(max(wait, 0), p.cost)
	w.seen[p.idx] = true
	e := &w.out.Sites[p.idx]
	e.ExposedUS += wait * mult
	e.OverlappedUS += (p.cost - wait) * mult
	w.out.ExposedUS += wait * mult
	w.out.OverlappedUS += (p.cost - wait) * mult
}

// wrapped is the collective an async-start's called computation holds (-1 if none).
func (w *scheduleWalker) wrapped(in *Instr) int {
	callee := w.a.Module.Computation(in.Attrs["calls"])
	if callee == nil {
		return -1
	}
	for _, ci := range callee.Instrs {
		if i, ok := w.colls[callee.Name+"/"+ci.Name]; ok {
			return i
		}
	}
	return -1
}

// walk runs one execution of c, mult times per step, and returns its time.
func (w *scheduleWalker) walk(c *Computation, mult float64, depth int) (float64, error) {
	if c == nil || depth > maxScheduleDepth || w.walking[c] {
		return 0, nil
	}
	w.walking[c] = true
	defer delete(w.walking, c)
	var t float64
	var open []pending
	done := func(name string) (pending, bool) {
		for k, p := range open {
			if p.name == name {
				open = append(open[:k], open[k+1:]...)
				return p, true
			}
		}
		return pending{}, false
	}
	alias := map[string]string{} // async-update -> the start it continues
	for _, in := range c.Instrs {
		if w.steps++; w.steps%4096 == 0 {
			if err := w.ctx.Err(); err != nil {
				return 0, err
			}
		}
		idx, isColl := w.colls[c.Name+"/"+in.Name]
		_, phase := asyncBase(in.Opcode)
		switch {
		case isColl && phase == "start":
			open = append(open, pending{name: in.Name, idx: idx, at: t, cost: w.collectiveCost(idx, in.Name)})
		case in.Opcode == "async-start" && w.wrapped(in) >= 0:
			i := w.wrapped(in)
			open = append(open, pending{name: in.Name, idx: i, at: t, cost: w.collectiveCost(i, in.Name)})
		case phase == "update" && len(in.Operands) > 0:
			alias[in.Name] = in.Operands[0]
		case phase == "done" && len(in.Operands) > 0:
			start := in.Operands[0]
			for k := 0; k < 16; k++ {
				if up, ok := alias[start]; ok {
					start = up
				}
			}
			if p, ok := done(start); ok {
				if v, ok := w.measured(in.Name); ok && p.idx >= 0 && !w.out.Sites[p.idx].Measured {
					p.cost = v
					w.out.MeasuredInstructions++
					w.out.Sites[p.idx].Measured = true
					w.out.Sites[p.idx].MeasuredUS = v * float64(max(w.a.Collectives[p.idx].TripCount, 1))
				}
				wait := p.at + p.cost - t
				w.record(p, wait, mult)
				t += max(wait, 0)
			}
		case isColl:
			p := pending{name: in.Name, idx: idx, at: t, cost: w.collectiveCost(idx, in.Name)}
			w.record(p, p.cost, mult)
			t += p.cost
		case in.Opcode == "while":
			trip, known := w.a.Module.TripCount(c, in)
			if !known {
				trip = 1
			}
			n := float64(trip)
			body, err := w.walk(w.a.Module.Computation(in.Attrs["body"]), mult*n, depth+1)
			if err != nil {
				return 0, err
			}
			cond, err := w.walk(w.a.Module.Computation(in.Attrs["condition"]), mult*n, depth+1)
			if err != nil {
				return 0, err
			}
			t += n * (body + cond)
		case in.Opcode == "call" || in.Opcode == "async-start":
			ct, err := w.walk(w.a.Module.Computation(in.Attrs["to_apply"]+in.Attrs["calls"]), mult, depth+1)
			if err != nil {
				return 0, err
			}
			t += ct
		case in.Opcode == "conditional":
			var branches []*Computation
			for _, attr := range [...]string{"true_computation", "false_computation", "branch_computations"} {
				for name := range strings.SplitSeq(strings.Trim(strings.TrimSpace(in.Attrs[attr]), "{}"), ",") {
					if b := w.a.Module.Computation(name); b != nil {
						branches = append(branches, b)
					}
				}
			}
			for _, b := range branches {
				bt, err := w.walk(b, mult/float64(len(branches)), depth+1)
				if err != nil {
					return 0, err
				}
				t += bt / float64(len(branches))
			}
		default:
			ct := w.computeCost(c, in)
			t += ct
			w.out.ComputeUS += ct * mult
		}
	}
	for _, p := range open { // started and not done here: the computation ends when they finish
		wait := p.at + p.cost - t
		w.record(p, wait, mult)
		t += max(wait, 0)
	}
	return t, nil
}

// freeOps make no work of their own: they name or alias buffers.
var freeOps = map[string]bool{"parameter": true, "constant": true, "get-tuple-element": true, "tuple": true, "bitcast": true,
	"after-all": true, "partition-id": true, "replica-id": true, "add-dependency": true, "opt-barrier": true, "domain": true,
	"copy-start": true, "copy-done": true, "send-done": true, "recv-done": true, "get-dimension-size": true,
	// host transfers and the recvs priced at their sends
	"send": true, "recv": true, "send-start": true, "recv-start": true, "infeed": true, "outfeed": true}

// computeCost is one run of a compute op: the profile's cost, else its roofline time.
func (w *scheduleWalker) computeCost(c *Computation, in *Instr) float64 {
	if v, ok := w.measured(in.Name); ok {
		w.out.MeasuredInstructions++
		return v
	}
	if w.opts.Roofline == nil || freeOps[in.Opcode] {
		return 0
	}
	flops, bytes := w.work(c, in, 0)
	return w.opts.Roofline.TimeUS(flops, bytes)
}

// work is an op's FLOPs (dots and convolutions, also inside a fusion) and the bytes
// it reads and writes.
func (w *scheduleWalker) work(c *Computation, in *Instr, depth int) (flops, bytes float64) {
	operand := func(i int) *Instr {
		if i < len(in.Operands) {
			return c.Instr(in.Operands[i])
		}
		return nil
	}
	switch in.Opcode {
	case "dynamic-slice", "slice":
		return 0, 2 * float64(in.Shape.Bytes())
	case "dynamic-update-slice":
		if u := operand(1); u != nil {
			return 0, 2 * float64(u.Shape.Bytes())
		}
	}
	bytes = float64(in.Shape.Bytes())
	for i := range in.Operands {
		if d := operand(i); d != nil {
			bytes += float64(d.Shape.Bytes())
		}
	}
	return w.flops(c, in, depth), bytes
}

// flops counts a dot's or convolution's multiply-adds twice, and a fusion's inside it.
func (w *scheduleWalker) flops(c *Computation, in *Instr, depth int) float64 {
	switch in.Opcode {
	case "dot":
		lhs := c.Instr(firstOr(in.Operands))
		if lhs == nil {
			return 0
		}
		dims, err := Ints(in.Attrs["lhs_contracting_dims"])
		if err != nil {
			return 0
		}
		k := 1.0
		for _, d := range dims {
			if d >= 0 && int(d) < len(lhs.Shape.Dims) {
				k *= float64(lhs.Shape.Dims[d])
			}
		}
		return 2 * float64(in.Shape.Elements()) * k
	case "convolution":
		if len(in.Operands) < 2 {
			return 0
		}
		rhs := c.Instr(in.Operands[1])
		if rhs == nil || len(rhs.Shape.Dims) == 0 {
			return 0
		}
		out := rhs.Shape.Dims[len(rhs.Shape.Dims)-1]
		if labels := in.Attrs["dim_labels"]; labels != "" { // lhs_rhs->out: the kernel's 'o'
			if _, r, ok := strings.Cut(labels, "_"); ok {
				r, _, _ = strings.Cut(r, "->")
				if o := strings.IndexByte(r, 'o'); o >= 0 && o < len(rhs.Shape.Dims) {
					out = rhs.Shape.Dims[o]
				}
			}
		}
		if out <= 0 {
			return 0
		}
		return 2 * float64(in.Shape.Elements()) * float64(rhs.Shape.Elements()/out)
	case "fusion":
		callee := w.a.Module.Computation(in.Attrs["calls"])
		if callee == nil || depth >= 8 {
			return 0
		}
		var f float64
		for _, fi := range callee.Instrs {
			f += w.flops(callee, fi, depth+1)
		}
		return f
	}
	return 0
}

func firstOr(ss []string) string {
	if len(ss) > 0 {
		return ss[0]
	}
	return ""
}
