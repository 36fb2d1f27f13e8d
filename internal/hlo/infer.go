package hlo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// This file reads the shardings on both sides of a remat chain: the source from the
// parameter's sharding=, the target from the dynamic-slice that cuts the whole tensor,
// whose start indices XLA computes from partition-id (arithmetic, or tables of offsets
// indexed by it). Evaluating those indices for every partition gives each device's tile,
// which reads back as an HloSharding on the mesh.

// maxEvalDepth bounds the instruction chains evaluated for one index.
const maxEvalDepth = 64

// frame is a computation being evaluated, called by call from outer (nil at the top).
type frame struct {
	comp  *Computation
	call  *Instr
	outer *frame
}

type evaluator struct {
	m *Module
	// budget bounds the instructions evaluated in all (partitions x chain length).
	budget int
}

// scalar evaluates an integer scalar instruction for partition p.
func (e *evaluator) scalar(f *frame, name string, p int, depth int) (int64, bool) {
	e.budget--
	if f == nil || depth > maxEvalDepth || e.budget < 0 {
		return 0, false
	}
	in := f.comp.Instr(name)
	if in == nil || in.Shape.IsTuple() || in.Shape.Elements() != 1 {
		return 0, false
	}
	arg := func(i int) (int64, bool) {
		if i >= len(in.Operands) {
			return 0, false
		}
		return e.scalar(f, in.Operands[i], p, depth+1)
	}
	switch in.Opcode {
	case "parameter":
		return e.viaCall(f, in, func(outer *frame, op string) (int64, bool) { return e.scalar(outer, op, p, depth+1) })
	case "partition-id":
		return int64(p), true
	case "replica-id":
		return 0, true
	case "constant":
		vals, ok := literal(in.Args)
		if !ok || len(vals) != 1 {
			return 0, false
		}
		return vals[0], true
	case "convert", "bitcast", "reshape", "copy":
		return arg(0)
	case "dynamic-slice":
		if len(in.Operands) != 2 {
			return 0, false
		}
		table, ok := e.table(f, in.Operands[0], depth+1)
		if !ok {
			return 0, false
		}
		i, ok := arg(1)
		if !ok {
			return 0, false
		}
		i = min(max(i, 0), int64(len(table)-1)) // XLA clamps start indices
		return table[i], true
	case "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum":
		x, ok1 := arg(0)
		y, ok2 := arg(1)
		if !ok1 || !ok2 {
			return 0, false
		}
		return binary(in.Opcode, x, y)
	}
	return 0, false
}

func binary(op string, x, y int64) (int64, bool) {
	switch op {
	case "add":
		return x + y, true
	case "subtract":
		return x - y, true
	case "multiply":
		return x * y, true
	case "divide", "remainder":
		if y == 0 {
			return 0, false
		}
		if op == "divide" {
			return x / y, true
		}
		return x % y, true
	case "maximum":
		return max(x, y), true
	case "minimum":
		return min(x, y), true
	}
	return 0, false
}

// viaCall resolves parameter in of f to the calling instruction's operand.
func (e *evaluator) viaCall(f *frame, in *Instr, next func(*frame, string) (int64, bool)) (int64, bool) {
	if f.call == nil {
		return 0, false
	}
	idx, err := strconv.Atoi(strings.TrimSpace(in.Args))
	if err != nil || idx < 0 || idx >= len(f.call.Operands) {
		return 0, false
	}
	return next(f.outer, f.call.Operands[idx])
}

// table evaluates a 1-D integer constant (through parameters and pass-through ops).
func (e *evaluator) table(f *frame, name string, depth int) ([]int64, bool) {
	e.budget--
	if f == nil || depth > maxEvalDepth || e.budget < 0 {
		return nil, false
	}
	in := f.comp.Instr(name)
	if in == nil || len(in.Shape.Dims) != 1 {
		return nil, false
	}
	switch in.Opcode {
	case "constant":
		vals, ok := literal(in.Args)
		if !ok || int64(len(vals)) != in.Shape.Dims[0] || len(vals) == 0 {
			return nil, false
		}
		return vals, true
	case "parameter":
		var out []int64
		_, ok := e.viaCall(f, in, func(outer *frame, op string) (int64, bool) {
			t, ok := e.table(outer, op, depth+1)
			out = t
			return 0, ok
		})
		return out, ok
	case "bitcast", "copy", "reshape", "convert":
		if len(in.Operands) == 0 {
			return nil, false
		}
		return e.table(f, in.Operands[0], depth+1)
	}
	return nil, false
}

// literal parses a constant's integer literal: "0", "{0, 512, 1024}".
func literal(text string) ([]int64, bool) {
	text = strings.TrimSpace(text)
	text = strings.TrimSuffix(strings.TrimPrefix(text, "{"), "}")
	if strings.ContainsAny(text, "{}.") {
		return nil, false
	}
	var out []int64
	for s := range strings.SplitSeq(text, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// sliceOf finds the dynamic-slice that in (a dynamic-slice, or a fusion calling one)
// applies to its operand-th operand, with the frame its start indices evaluate in.
func (e *evaluator) sliceOf(comp *Computation, in *Instr, operand int) (*Instr, *frame) {
	top := &frame{comp: comp}
	if in.Opcode == "dynamic-slice" {
		return in, top
	}
	callee := strings.TrimPrefix(strings.TrimSpace(in.Attrs["calls"]), "%")
	var fc *Computation
	for _, c := range e.m.Computations {
		if c.Name == callee {
			fc = c
		}
	}
	if fc == nil {
		return nil, nil
	}
	reach := map[string]bool{}
	for _, fi := range fc.Instrs {
		switch {
		case fi.Opcode == "parameter" && strings.TrimSpace(fi.Args) == strconv.Itoa(operand):
			reach[fi.Name] = true
		case passThrough[fi.Opcode] && len(fi.Operands) > 0 && reach[fi.Operands[0]] && fi.Opcode != "reshape" && fi.Opcode != "transpose":
			reach[fi.Name] = true
		case fi.Opcode == "dynamic-slice" && len(fi.Operands) > 0 && reach[fi.Operands[0]]:
			return fi, &frame{comp: fc, call: in, outer: top}
		}
	}
	return nil, nil
}

// inferTarget reads the sharding a dynamic-slice of the whole tensor (shape) cuts on
// each partition: every start index evaluated for every partition p (device p of the
// mesh), each device's tile read back as an HloSharding on the mesh.
func (a *Analysis) inferTarget(comp *Computation, in *Instr, operand int, shape []int64) (sharding.Sharding, error) {
	e := &evaluator{m: a.Module}
	ds, f := e.sliceOf(comp, in, operand)
	if ds == nil {
		return sharding.Sharding{}, fmt.Errorf("no dynamic-slice of the whole tensor in %%%s", in.Name)
	}
	sizes, err := Ints(ds.Attrs["dynamic_slice_sizes"])
	if err != nil || len(sizes) != len(shape) || len(ds.Operands) != len(shape)+1 {
		return sharding.Sharding{}, fmt.Errorf("%%%s: dynamic_slice_sizes do not match the whole shape %v", ds.Name, shape)
	}
	n := a.Mesh.NumDevices()
	e.budget = n * len(shape) * maxEvalDepth // a real index takes a dozen steps
	counts := make([]int, len(shape))
	for d := range shape {
		if sizes[d] <= 0 || shape[d]%sizes[d] != 0 {
			return sharding.Sharding{}, fmt.Errorf("%%%s: slice size %d does not divide dim %d (%d)", ds.Name, sizes[d], d, shape[d])
		}
		counts[d] = int(shape[d] / sizes[d])
	}
	tiles := 1
	for _, c := range counts {
		tiles *= c
	}
	if n%tiles != 0 {
		return sharding.Sharding{}, fmt.Errorf("%d tiles on %d devices", tiles, n)
	}
	byTile := make([][]int, tiles)
	for p := range n {
		t := 0
		for d := range shape {
			off, ok := e.scalar(f, ds.Operands[d+1], p, 0)
			if !ok {
				return sharding.Sharding{}, fmt.Errorf("%%%s: start index %d is not computed from partition-id by arithmetic or tables", ds.Name, d)
			}
			if off%sizes[d] != 0 || off < 0 || off >= shape[d] {
				return sharding.Sharding{}, fmt.Errorf("%%%s: partition %d starts dim %d at %d, not on a tile boundary", ds.Name, p, d, off)
			}
			t = t*counts[d] + int(off/sizes[d])
		}
		byTile[t] = append(byTile[t], p) // partition p is device p
	}
	rep := n / tiles
	var b strings.Builder
	b.WriteString("{devices=[")
	for d, c := range counts {
		if d > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
	}
	if rep > 1 {
		b.WriteString("," + strconv.Itoa(rep))
	}
	b.WriteByte(']')
	for i, ids := range byTile {
		if len(ids) != rep {
			return sharding.Sharding{}, fmt.Errorf("tile %d is on %d devices, others on %d", i, len(ids), rep)
		}
		slices.Sort(ids)
		for j, id := range ids {
			if i > 0 || j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(id))
		}
	}
	if rep > 1 {
		b.WriteString(" last_tile_dim_replicate")
	}
	b.WriteByte('}')
	return sharding.ParseHLO(b.String(), a.Mesh, shape, "target")
}
