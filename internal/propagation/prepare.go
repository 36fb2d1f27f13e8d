package propagation

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/shardplan/shardplan/internal/sharding"
)

// tensorState is one tensor during propagation.
type tensorState struct {
	name  string
	shape []int64
	elems int64
	bits  int
	sh    sharding.Sharding  // current sharding
	ann   *sharding.Sharding // the annotation (canonical), nil when none
	// deferred holds the axes of dims whose user priority has not run yet; like
	// explicitly replicated axes, propagation may not use them on this tensor.
	deferred []sharding.AxisRef
	origins  []Origin
	uses     int // operand uses by ops
}

// node is an op (or one data-flow edge of a while op) in the propagation worklist.
type node struct {
	name, kind, field string
	rule              *Rule // nil: nothing propagates through the node
	class             opClass
	tensors           []int // operand ids, then result ids
	nOperands         int
	edge              bool // a while data-flow edge (sources -> targets)
	multiUse          bool // some non-scalar operand has more than one use
	elems             []int64
	opIndex           int // index in graphState.opNames of the op it belongs to
}

type graphState struct {
	mesh    *sharding.Mesh
	tensors []*tensorState
	byName  map[string]int
	nodes   []*node // topological order, each while's edges right after it
	users   [][]int // tensor id -> nodes that touch it
	opNodes []int   // per op (flattened, graph order): its node, or -1
	opNames []string
	opKinds []string
}

// ctxCheckEvery is how many ops prepare handles between two checks of its context.
const ctxCheckEvery = 1024

type flatOp struct {
	op    *Op
	field string
	while int // index (in flat) of the enclosing while, -1 at top level
}

// prepare validates g against m and builds the propagation state. Every error is a
// *sharding.FieldError or sharding.Errors naming the wire path, or ctx's error once ctx
// is done (checked every ctxCheckEvery ops).
func prepare(ctx context.Context, g *Graph, m *sharding.Mesh) (*graphState, error) {
	if g == nil {
		return nil, sharding.Fieldf("", "no graph")
	}
	gs := &graphState{mesh: m, byName: map[string]int{}}
	var errs sharding.Errors
	addErr := func(err error) {
		if es, ok := sharding.AsFieldErrors(err); ok {
			errs = append(errs, es...)
		} else if err != nil {
			errs = append(errs, sharding.Fieldf("", "%v", err))
		}
	}
	for _, name := range sortedKeys(g.Tensors) {
		t := g.Tensors[name]
		field := "tensors." + name
		if t == nil {
			addErr(sharding.Fieldf(field, "is null; give {shape, dtype, sharding}"))
			continue
		}
		ts := &tensorState{name: name, shape: t.Shape, elems: numElements(t.Shape), bits: t.ElemBits}
		if ts.bits <= 0 {
			ts.bits = 32
		}
		bad := false
		for d, n := range t.Shape {
			if n < 0 {
				addErr(sharding.Fieldf(field+".shape["+strconv.Itoa(d)+"]", "dim size %d is negative", n))
				bad = true
			}
		}
		if bad {
			continue
		}
		if t.Sharding != nil {
			// Re-parse the printed form: this checks every invariant of a sharding built
			// in Go as strictly as one sent as JSON.
			sh, err := sharding.ParseText(t.Sharding.Body(), m, t.Shape, field+".sharding")
			if err != nil {
				addErr(err)
				continue
			}
			ts.ann = &sh
		}
		gs.byName[name] = len(gs.tensors)
		gs.tensors = append(gs.tensors, ts)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	// Flatten ops (regions included) with their wire paths.
	var flat []flatOp
	var walk func(ops []Op, prefix string, while int)
	walk = func(ops []Op, prefix string, while int) {
		for i := range ops {
			f := prefix + "[" + strconv.Itoa(i) + "]"
			idx := len(flat)
			o := ops[i] // a copy: prepare names unnamed ops and must not modify g
			flat = append(flat, flatOp{op: &o, field: f, while: while})
			if ops[i].Kind == "while" {
				if ops[i].Cond != nil {
					walk(ops[i].Cond.Ops, f+".cond.ops", idx)
				}
				if ops[i].Body != nil {
					walk(ops[i].Body.Ops, f+".body.ops", idx)
				}
			}
		}
	}
	walk(g.Ops, "ops", -1)
	producer := make([]int, len(gs.tensors)) // flat op index, -1 none, -2 graph input
	for i := range producer {
		producer[i] = -1
	}
	for i, name := range g.Inputs {
		id, ok := gs.byName[name]
		if !ok {
			addErr(sharding.Fieldf("inputs["+strconv.Itoa(i)+"]", "tensor %q is not in tensors", name))
			continue
		}
		producer[id] = -2
	}
	for i, name := range g.Outputs {
		if _, ok := gs.byName[name]; !ok {
			addErr(sharding.Fieldf("outputs["+strconv.Itoa(i)+"]", "tensor %q is not in tensors", name))
		}
	}
	names := map[string]string{}
	ids := func(list []string, field string) ([]int, bool) {
		out := make([]int, len(list))
		ok := true
		for i, n := range list {
			id, found := gs.byName[n]
			if !found {
				addErr(sharding.Fieldf(field+"["+strconv.Itoa(i)+"]", "tensor %q is not in tensors", n))
				ok = false
				continue
			}
			out[i] = id
		}
		return out, ok
	}
	produce := func(id, op int, field string) {
		switch p := producer[id]; {
		case p == -2:
			addErr(sharding.Fieldf(field, "tensor %q is a graph input and cannot be produced by op %q", gs.tensors[id].name, flat[op].op.Name))
		case p >= 0:
			addErr(sharding.Fieldf(field, "tensor %q is already produced by op %q (%s); every tensor has one producer", gs.tensors[id].name, flat[p].op.Name, flat[p].field))
		default:
			producer[id] = op
		}
	}
	opIn := make([][]int, len(flat))
	opOut := make([][]int, len(flat))
	type whileInfo struct{ cp, bp, br, cr []int }
	whiles := map[int]*whileInfo{}
	for i, fo := range flat {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		op := fo.op
		if op.Name == "" {
			op.Name = fo.field
		}
		if prev, dup := names[op.Name]; dup {
			addErr(sharding.Fieldf(fo.field+".name", "op name %q is already used by %s; op names must be unique", op.Name, prev))
		}
		names[op.Name] = fo.field
		in, ok1 := ids(op.Operands, fo.field+".operands")
		out, ok2 := ids(op.Results, fo.field+".results")
		if !ok1 || !ok2 {
			continue
		}
		opIn[i], opOut[i] = in, out
		for k, id := range out {
			produce(id, i, fo.field+".results["+strconv.Itoa(k)+"]")
		}
		if op.Kind == "while" {
			if op.Cond == nil || op.Body == nil {
				addErr(sharding.Fieldf(fo.field, "op %q (while) needs both \"cond\" and \"body\" regions", op.Name))
				continue
			}
			w := &whileInfo{}
			var ok bool
			if w.cp, ok = ids(op.Cond.Params, fo.field+".cond.params"); !ok {
				continue
			}
			if w.bp, ok = ids(op.Body.Params, fo.field+".body.params"); !ok {
				continue
			}
			if w.br, ok = ids(op.Body.Returns, fo.field+".body.returns"); !ok {
				continue
			}
			if w.cr, ok = ids(op.Cond.Returns, fo.field+".cond.returns"); !ok {
				continue
			}
			for k, id := range w.cp {
				produce(id, i, fo.field+".cond.params["+strconv.Itoa(k)+"]")
			}
			for k, id := range w.bp {
				produce(id, i, fo.field+".body.params["+strconv.Itoa(k)+"]")
			}
			whiles[i] = w
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	// Topological order (Kahn). A while's body returns are not dependencies of the while:
	// they close the loop through data-flow edges, which are not ops.
	indeg := make([]int, len(flat))
	consumers := make([][]int, len(gs.tensors))
	for i := range flat {
		for _, id := range opIn[i] {
			if p := producer[id]; p >= 0 {
				indeg[i]++
			}
			consumers[id] = append(consumers[id], i)
		}
		// Region ops run after their while is "entered": they depend on its params, which
		// the while produces; nothing more is needed.
	}
	order := make([]int, 0, len(flat))
	queue := make([]int, 0, len(flat))
	for i := range flat {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	produced := func(i int) []int {
		out := slices.Clone(opOut[i])
		if w := whiles[i]; w != nil {
			out = append(append(out, w.cp...), w.bp...)
		}
		return out
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		order = append(order, i)
		for _, id := range produced(i) {
			for _, c := range consumers[id] {
				indeg[c]--
				if indeg[c] == 0 {
					queue = append(queue, c)
				}
			}
		}
	}
	if len(order) < len(flat) {
		for i := range flat {
			if indeg[i] > 0 {
				return nil, sharding.Fieldf(flat[i].field, "op %q is part of a dependency cycle; cycles are only allowed through a while loop's regions", flat[i].op.Name)
			}
		}
	}
	// Rules, nodes and data-flow edges.
	shapes := func(list []int) [][]int64 {
		out := make([][]int64, len(list))
		for i, id := range list {
			out[i] = gs.tensors[id].shape
		}
		return out
	}
	gs.opNodes = make([]int, len(flat))
	gs.opNames = make([]string, len(flat))
	gs.opKinds = make([]string, len(flat))
	for i, fo := range flat {
		gs.opNodes[i] = -1
		gs.opNames[i] = fo.op.Name
		gs.opKinds[i] = fo.op.Kind
	}
	for _, i := range order {
		fo := flat[i]
		op := fo.op
		for _, id := range opIn[i] {
			gs.tensors[id].uses++
		}
		if op.Kind == "while" {
			if err := addWhile(gs, fo, i, opIn[i], opOut[i], whiles[i].cp, whiles[i].bp, whiles[i].br, whiles[i].cr); err != nil {
				addErr(err)
			}
			continue
		}
		rule, class, err := buildRule(op, fo.field, shapes(opIn[i]), shapes(opOut[i]))
		if err != nil {
			addErr(err)
			continue
		}
		if rule == nil {
			continue
		}
		gs.opNodes[i] = len(gs.nodes)
		gs.nodes = append(gs.nodes, &node{name: op.Name, kind: op.Kind, field: fo.field, rule: rule, class: class,
			tensors: slices.Concat(opIn[i], opOut[i]), nOperands: len(opIn[i]), opIndex: i})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	gs.users = make([][]int, len(gs.tensors))
	for ni, n := range gs.nodes {
		n.elems = make([]int64, len(n.tensors))
		for p := range n.tensors {
			e := int64(1)
			for _, fs := range n.rule.Dims(p) {
				for _, f := range fs {
					e *= n.rule.FactorSizes[f]
				}
			}
			n.elems[p] = e
		}
		for p, id := range n.tensors {
			if !slices.Contains(n.tensors[:p], id) {
				gs.users[id] = append(gs.users[id], ni)
			}
			if p < n.nOperands && !n.edge && len(gs.tensors[id].shape) > 0 && gs.tensors[id].uses > 1 {
				n.multiUse = true
			}
		}
	}
	return gs, nil
}

// addWhile checks a while op's shapes and adds one data-flow edge node per result:
// sources (operand i, body return i) -> targets (result i, body param i, cond param i).
func addWhile(gs *graphState, fo flatOp, opIdx int, in, out, cp, bp, br, cr []int) error {
	op := fo.op
	n := len(in)
	check := func(list []int, what string) error {
		if len(list) != n {
			return sharding.Fieldf(fo.field+"."+what, "op %q (while): has %d entries but the loop carries %d values", op.Name, len(list), n)
		}
		for k, id := range list {
			if !slices.Equal(gs.tensors[id].shape, gs.tensors[in[k]].shape) {
				return sharding.Fieldf(fo.field+"."+what+"["+strconv.Itoa(k)+"]", "op %q (while): tensor %q has shape %v but operand %d has %v", op.Name, gs.tensors[id].name, gs.tensors[id].shape, k, gs.tensors[in[k]].shape)
			}
		}
		return nil
	}
	for _, c := range []struct {
		list []int
		what string
	}{{out, "results"}, {cp, "cond.params"}, {bp, "body.params"}, {br, "body.returns"}} {
		if err := check(c.list, c.what); err != nil {
			return err
		}
	}
	if len(cr) != 1 || len(gs.tensors[cr[0]].shape) != 0 {
		return sharding.Fieldf(fo.field+".cond.returns", "op %q (while): the condition must return one scalar predicate", op.Name)
	}
	for k := range n {
		shape := gs.tensors[in[k]].shape
		ids := []int{in[k], br[k], out[k], bp[k], cp[k]}
		r := newRule([]int{len(shape), len(shape)}, []int{len(shape), len(shape), len(shape)})
		for d, s := range shape {
			f := r.addFactor(s, FactorPassThrough)
			for t := range 5 {
				r.mapDim(t, d, f)
			}
		}
		r.finish()
		gs.nodes = append(gs.nodes, &node{name: op.Name, kind: "while", field: fmt.Sprintf("%s (value %d)", fo.field, k), rule: r,
			class: classPassThrough, tensors: ids, nOperands: 2, edge: true, opIndex: opIdx})
	}
	return nil
}
