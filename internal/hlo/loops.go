package hlo

import (
	"regexp"
	"strconv"
	"strings"
)

// Runs is how many times a computation runs per execution of the module: the product
// of the trip counts of the while loops around it (summed over its call sites), and
// whether every one of those counts is known.
type Runs struct {
	Count int64
	Known bool
	// Unknown names the first loop whose count is not known ("" when all are).
	Unknown string
}

// maxRuns bounds a computation's run count (loops nested deep enough to pass it are
// priced at it).
const maxRuns = 1 << 40

var knownTripCount = regexp.MustCompile(`"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)"?`)

// calledComputations lists the computations in calls, with the factor each runs per
// run of in (the trip count for a while's body and condition) and whether it is known.
func (m *Module) calledComputations(caller *Computation, in *Instr) []call {
	var out []call
	add := func(attr string, trip int64, known bool, loop string) {
		v, ok := in.Attrs[attr]
		if !ok {
			return
		}
		v = strings.Trim(strings.TrimSpace(v), "{}")
		for name := range strings.SplitSeq(v, ",") {
			if c := m.Computation(name); c != nil {
				out = append(out, call{c, trip, known, loop})
			}
		}
	}
	if in.Opcode == "while" {
		trip, known := m.TripCount(caller, in)
		if !known {
			trip = 1
		}
		add("body", trip, known, in.Name)
		add("condition", trip, known, in.Name)
		return out
	}
	if _, phase := asyncBase(in.Opcode); phase == "done" || phase == "update" {
		// async-done and async-update print the computation their async-start runs
		// (calls=): one run of it, counted at the start.
		return out
	}
	for _, attr := range [...]string{"calls", "to_apply", "true_computation", "false_computation", "branch_computations", "async_execution_thread_computations"} {
		add(attr, 1, true, "")
	}
	return out
}

type call struct {
	callee *Computation
	trip   int64
	known  bool
	loop   string
}

// ComputationRuns gives every computation's Runs, from the entry (run once) through
// every call, while loops multiplying by their trip counts. Computations nothing calls
// run once.
func (m *Module) ComputationRuns() map[*Computation]Runs {
	callers := map[*Computation][]struct {
		from *Computation
		call call
	}{}
	for _, c := range m.Computations {
		for _, in := range c.Instrs {
			for _, cl := range m.calledComputations(c, in) {
				callers[cl.callee] = append(callers[cl.callee], struct {
					from *Computation
					call call
				}{c, cl})
			}
		}
	}
	runs := map[*Computation]Runs{}
	visiting := map[*Computation]bool{}
	var of func(c *Computation) Runs
	of = func(c *Computation) Runs {
		if r, ok := runs[c]; ok {
			return r
		}
		if visiting[c] {
			return Runs{Count: 1, Known: true}
		}
		if c == m.Entry || len(callers[c]) == 0 {
			runs[c] = Runs{Count: 1, Known: true}
			return runs[c]
		}
		visiting[c] = true
		r := Runs{Known: true}
		for _, e := range callers[c] {
			up := of(e.from)
			r.Count = min(r.Count+min(up.Count*e.call.trip, maxRuns), maxRuns)
			if !up.Known && r.Known {
				r.Known, r.Unknown = false, up.Unknown
			}
			if !e.call.known && r.Known {
				r.Known, r.Unknown = false, e.call.loop
			}
		}
		visiting[c] = false
		runs[c] = r
		return r
	}
	for _, c := range m.Computations {
		of(c)
	}
	return runs
}

// TripCount gives a while loop's trip count: its backend_config's known_trip_count, or
// the loop's induction variable read off the condition's compare against a constant,
// the constant it starts from (the while's init tuple) and the constant the body adds.
func (m *Module) TripCount(caller *Computation, w *Instr) (int64, bool) {
	if bc, ok := w.Attrs["backend_config"]; ok {
		text := bc
		if s, err := strconv.Unquote(bc); err == nil {
			text = s
		}
		if mm := knownTripCount.FindStringSubmatch(text); mm != nil {
			if n, err := strconv.ParseInt(mm[1], 10, 64); err == nil && n >= 0 {
				return n, true
			}
		}
	}
	cond, body := m.Computation(w.Attrs["condition"]), m.Computation(w.Attrs["body"])
	if cond == nil || body == nil || len(w.Operands) != 1 {
		return 0, false
	}
	root := rootOf(cond)
	if root == nil || root.Opcode != "compare" || len(root.Operands) != 2 {
		return 0, false
	}
	dir := strings.TrimSpace(root.Attrs["direction"])
	idx, lim, ok := inductionCompare(cond, root)
	if !ok {
		idx, lim, ok = inductionCompare(cond, &Instr{Operands: []string{root.Operands[1], root.Operands[0]}})
		if !ok {
			return 0, false
		}
		dir = map[string]string{"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE"}[dir]
	}
	init, ok := tupleConstant(caller, w.Operands[0], idx)
	if !ok {
		return 0, false
	}
	step, ok := bodyStep(body, idx)
	if !ok || step == 0 {
		return 0, false
	}
	var n int64
	switch {
	case (dir == "LT" || dir == "NE") && step > 0:
		n = ceilDiv(lim-init, step)
	case dir == "LE" && step > 0:
		n = ceilDiv(lim-init+1, step)
	case (dir == "GT" || dir == "NE") && step < 0:
		n = ceilDiv(init-lim, -step)
	case dir == "GE" && step < 0:
		n = ceilDiv(init-lim+1, -step)
	default:
		return 0, false
	}
	return max(n, 0), true
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

func rootOf(c *Computation) *Instr {
	for _, in := range c.Instrs {
		if in.Root {
			return in
		}
	}
	if len(c.Instrs) > 0 {
		return c.Instrs[len(c.Instrs)-1]
	}
	return nil
}

// through follows copies, converts, bitcasts and reshapes back to the value they pass on.
func through(c *Computation, name string) *Instr {
	in := c.Instr(name)
	for i := 0; in != nil && i < 16 && (in.Opcode == "copy" || in.Opcode == "convert" || in.Opcode == "bitcast" || in.Opcode == "reshape") && len(in.Operands) == 1; i++ {
		in = c.Instr(in.Operands[0])
	}
	return in
}

// inductionCompare reads compare(get-tuple-element(param, index=k), constant N).
func inductionCompare(c *Computation, cmp *Instr) (idx int, lim int64, ok bool) {
	g := through(c, cmp.Operands[0])
	k := through(c, cmp.Operands[1])
	if g == nil || k == nil || g.Opcode != "get-tuple-element" || k.Opcode != "constant" || len(g.Operands) != 1 {
		return 0, 0, false
	}
	if p := through(c, g.Operands[0]); p == nil || p.Opcode != "parameter" {
		return 0, 0, false
	}
	idx, err := strconv.Atoi(strings.TrimSpace(g.Attrs["index"]))
	if err != nil {
		return 0, 0, false
	}
	vals, ok := literal(k.Args)
	if !ok || len(vals) != 1 {
		return 0, 0, false
	}
	return idx, vals[0], true
}

// tupleConstant reads element idx of the tuple named name in c as a constant.
func tupleConstant(c *Computation, name string, idx int) (int64, bool) {
	t := through(c, name)
	if t == nil || t.Opcode != "tuple" || idx >= len(t.Operands) {
		return 0, false
	}
	k := through(c, t.Operands[idx])
	if k == nil || k.Opcode != "constant" {
		return 0, false
	}
	vals, ok := literal(k.Args)
	if !ok || len(vals) != 1 {
		return 0, false
	}
	return vals[0], true
}

// bodyStep reads the constant the body adds to (or subtracts from) element idx.
func bodyStep(body *Computation, idx int) (int64, bool) {
	root := rootOf(body)
	if root == nil || root.Opcode != "tuple" || idx >= len(root.Operands) {
		return 0, false
	}
	isVar := func(name string) bool {
		g := through(body, name)
		if g == nil || g.Opcode != "get-tuple-element" {
			return false
		}
		i, err := strconv.Atoi(strings.TrimSpace(g.Attrs["index"]))
		return err == nil && i == idx
	}
	constOf := func(name string) (int64, bool) {
		k := through(body, name)
		if k == nil || k.Opcode != "constant" {
			return 0, false
		}
		vals, ok := literal(k.Args)
		if !ok || len(vals) != 1 {
			return 0, false
		}
		return vals[0], true
	}
	// The update is the variable plus (or minus) a chain of constants: XLA's unrolled
	// loops add the step once per unrolled iteration (i+1, then that +1).
	var step int64
	name := root.Operands[idx]
	for range 64 {
		upd := through(body, name)
		if upd == nil || (upd.Opcode != "add" && upd.Opcode != "subtract") || len(upd.Operands) != 2 {
			return 0, false
		}
		if k, ok := constOf(upd.Operands[1]); ok {
			if upd.Opcode == "subtract" {
				k = -k
			}
			step += k
			name = upd.Operands[0]
		} else if k, ok := constOf(upd.Operands[0]); ok && upd.Opcode == "add" {
			step += k
			name = upd.Operands[1]
		} else {
			return 0, false
		}
		if isVar(name) {
			return step, true
		}
	}
	return 0, false
}
