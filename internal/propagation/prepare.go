package propagation

import (
	"context"
	"encoding/binary"
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
	name, kind string
	rule       *Rule // nil: nothing propagates through the node
	class      opClass
	tensors    []int // operand ids, then result ids
	nOperands  int
	edge       bool // a while data-flow edge (sources -> targets)
	multiUse   bool // some non-scalar operand has more than one use
	elems      []int64
	opIndex    int // index in graphState.opNames of the op it belongs to
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

// flatOp is one op of the graph or of a while region. Its wire path is built only
// when needed (preparer.field): most ops never need it.
type flatOp struct {
	op    *Op
	while int    // index (in flat) of the enclosing while, -1 at top level
	list  string // its list: "ops", or ".cond.ops" / ".body.ops" under the while
	index int    // its index in that list
}

// prepare validates g against m and builds the propagation state. Every error is a
// *sharding.FieldError or sharding.Errors naming the wire path, or ctx's error once ctx
// is done (checked every ctxCheckEvery ops).
func prepare(ctx context.Context, g *Graph, m *sharding.Mesh) (*graphState, error) {
	if g == nil {
		return nil, sharding.Fieldf("", "no graph")
	}
	p := &preparer{gs: &graphState{mesh: m, byName: make(map[string]int, len(g.Tensors))}}
	if p.addTensors(g); len(p.errs) > 0 {
		return nil, p.errs
	}
	p.flat = make([]flatOp, 0, g.NumOps())
	p.flatten(g.Ops, "ops", -1)
	p.linkGraphIO(g)
	if err := p.linkOps(ctx); err != nil {
		return nil, err
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	order, err := p.topoOrder()
	if err != nil {
		return nil, err
	}
	if p.addNodes(order); len(p.errs) > 0 {
		return nil, p.errs
	}
	p.indexUsers()
	return p.gs, nil
}

// preparer is the work state of prepare: the graph state it builds, the errors it
// collects and the flattened ops with their operands, results and producers.
type preparer struct {
	gs   *graphState
	errs sharding.Errors
	flat []flatOp
	// producer is, per tensor, the flat index of the op producing it, -1 none, -2 a
	// graph input.
	producer    []int
	opIn, opOut [][]int // per flat op: operand and result tensor ids
	whiles      map[int]*whileInfo
	names       map[string]int // op name -> flat index of its op
	states      []tensorState  // the tensors' states, allocated together
	nodeChunk   []node         // newNode's current chunk
	intChunk    []int          // intsOf's current chunk
	prodBuf     []int          // topoOrder's scratch
	// inShapes and outShapes are scratch for the rule cache's lookups.
	inShapes, outShapes [][]int64
	rules               ruleCache
	anns                map[string]*sharding.Sharding // parsed annotations by text and shape
	annKey              []byte                        // scratch for their keys
	bodies              map[*sharding.Sharding]string // printed annotations, by value
}

// whileInfo holds the tensor ids of a while's regions: cond params, body params, body
// returns and cond returns.
type whileInfo struct{ cp, bp, br, cr []int }

// addErr records err, flattening a list of field errors.
func (p *preparer) addErr(err error) {
	if es, ok := sharding.AsFieldErrors(err); ok {
		p.errs = append(p.errs, es...)
	} else if err != nil {
		p.errs = append(p.errs, sharding.Fieldf("", "%v", err))
	}
}

// addTensors checks and adds the tensors of g in name order.
func (p *preparer) addTensors(g *Graph) {
	gs := p.gs
	// One allocation for every state; the capacity never runs out, so pointers hold.
	p.states = make([]tensorState, 0, len(g.Tensors))
	for _, name := range sortedKeys(g.Tensors) {
		t := g.Tensors[name]
		// The tensor's path, "tensors." + name, is built only for an error.
		if t == nil {
			p.addErr(sharding.Fieldf("tensors."+name, "is null; give {shape, dtype, sharding}"))
			continue
		}
		p.states = append(p.states, tensorState{name: name, shape: t.Shape, elems: numElements(t.Shape), bits: t.ElemBits})
		ts := &p.states[len(p.states)-1]
		if ts.bits <= 0 {
			ts.bits = 32
		}
		bad := false
		for d, n := range t.Shape {
			if n < 0 {
				p.addErr(sharding.Fieldf("tensors."+name+".shape["+strconv.Itoa(d)+"]", "dim size %d is negative", n))
				bad = true
			}
		}
		if bad {
			continue
		}
		if t.Sharding != nil {
			ann, err := p.annotation(t.Sharding, t.Shape, name)
			if err != nil {
				p.addErr(err)
				continue
			}
			ts.ann = ann
		}
		gs.byName[name] = len(gs.tensors)
		gs.tensors = append(gs.tensors, ts)
	}
}

// annotation re-parses the printed form of tensor name's annotation sh, for its shape:
// this checks every invariant of a sharding built in Go as strictly as one sent as
// JSON. Tensors with the same annotation and shape (the weights of every layer) share
// one parse; propagation only reads annotations. A value shared by several tensors (as
// the API decodes them) is printed once.
func (p *preparer) annotation(sh *sharding.Sharding, shape []int64, name string) (*sharding.Sharding, error) {
	body, ok := p.bodies[sh]
	if !ok {
		body = sh.Body()
		if p.bodies == nil {
			p.bodies = map[*sharding.Sharding]string{}
		}
		p.bodies[sh] = body
	}
	key := append(binary.AppendUvarint(p.annKey[:0], uint64(len(body))), body...)
	for _, n := range shape {
		key = binary.AppendVarint(key, n)
	}
	p.annKey = key
	if ann, ok := p.anns[string(key)]; ok {
		return ann, nil
	}
	parsed, err := sharding.ParseText(body, p.gs.mesh, shape, "tensors."+name+".sharding")
	if err != nil {
		return nil, err
	}
	if p.anns == nil {
		p.anns = map[string]*sharding.Sharding{}
	}
	p.anns[string(key)] = &parsed
	return &parsed, nil
}

// flatten appends ops (regions included) to p.flat; list is their list's path under
// while, the flat index of the enclosing while (-1 and "ops" at top level). prepare
// names unnamed ops and must not modify g: those are copied, the others are only read.
func (p *preparer) flatten(ops []Op, list string, while int) {
	for i := range ops {
		idx := len(p.flat)
		op := &ops[i]
		if op.Name == "" {
			c := *op
			op = &c
		}
		p.flat = append(p.flat, flatOp{op: op, while: while, list: list, index: i})
		if op.Kind == "while" {
			if op.Cond != nil {
				p.flatten(op.Cond.Ops, ".cond.ops", idx)
			}
			if op.Body != nil {
				p.flatten(op.Body.Ops, ".body.ops", idx)
			}
		}
	}
}

// field is the wire path of flat op i: "ops[3]", "ops[3].body.ops[0]".
func (p *preparer) field(i int) string {
	fo := p.flat[i]
	prefix := fo.list
	if fo.while >= 0 {
		prefix = p.field(fo.while) + fo.list
	}
	return prefix + "[" + strconv.Itoa(fo.index) + "]"
}

// linkGraphIO marks the graph inputs as produced and checks that inputs and outputs
// name known tensors.
func (p *preparer) linkGraphIO(g *Graph) {
	p.producer = make([]int, len(p.gs.tensors))
	for i := range p.producer {
		p.producer[i] = -1
	}
	for i, name := range g.Inputs {
		id, ok := p.gs.byName[name]
		if !ok {
			p.addErr(sharding.Fieldf("inputs["+strconv.Itoa(i)+"]", "tensor %q is not in tensors", name))
			continue
		}
		p.producer[id] = -2
	}
	for i, name := range g.Outputs {
		if _, ok := p.gs.byName[name]; !ok {
			p.addErr(sharding.Fieldf("outputs["+strconv.Itoa(i)+"]", "tensor %q is not in tensors", name))
		}
	}
}

// ids resolves tensor names to ids; ok is false (and errors are recorded) when one is
// unknown.
func (p *preparer) ids(list []string, op int, what string) ([]int, bool) {
	out := p.intsOf(len(list))
	ok := true
	for i, n := range list {
		id, found := p.gs.byName[n]
		if !found {
			p.addErr(sharding.Fieldf(p.field(op)+what+"["+strconv.Itoa(i)+"]", "tensor %q is not in tensors", n))
			ok = false
			continue
		}
		out[i] = id
	}
	return out, ok
}

// produce records flat op op as the producer of tensor id, or an error when the tensor
// is a graph input or already produced.
func (p *preparer) produce(id, op int, what string, k int) {
	switch q := p.producer[id]; {
	case q == -2:
		p.addErr(sharding.Fieldf(p.field(op)+what+"["+strconv.Itoa(k)+"]", "tensor %q is a graph input and cannot be produced by op %q", p.gs.tensors[id].name, p.flat[op].op.Name))
	case q >= 0:
		p.addErr(sharding.Fieldf(p.field(op)+what+"["+strconv.Itoa(k)+"]", "tensor %q is already produced by op %q (%s); every tensor has one producer", p.gs.tensors[id].name, p.flat[q].op.Name, p.field(q)))
	default:
		p.producer[id] = op
	}
}

// linkOps names unnamed ops, checks names are unique, and resolves every op's operands,
// results and (for a while) region params and returns. It returns only ctx's error;
// field errors are recorded.
func (p *preparer) linkOps(ctx context.Context) error {
	p.names = make(map[string]int, len(p.flat))
	p.opIn = make([][]int, len(p.flat))
	p.opOut = make([][]int, len(p.flat))
	p.whiles = map[int]*whileInfo{}
	for i, fo := range p.flat {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		op := fo.op
		if op.Name == "" {
			op.Name = p.field(i)
		}
		if prev, dup := p.names[op.Name]; dup {
			p.addErr(sharding.Fieldf(p.field(i)+".name", "op name %q is already used by %s; op names must be unique", op.Name, p.field(prev)))
		}
		p.names[op.Name] = i
		in, ok1 := p.ids(op.Operands, i, ".operands")
		out, ok2 := p.ids(op.Results, i, ".results")
		if !ok1 || !ok2 {
			continue
		}
		p.opIn[i], p.opOut[i] = in, out
		for k, id := range out {
			p.produce(id, i, ".results", k)
		}
		if op.Kind == "while" {
			p.linkWhile(i, fo)
		}
	}
	return nil
}

// linkWhile resolves the region params and returns of the while at flat index i and
// makes the while the producer of its region params.
func (p *preparer) linkWhile(i int, fo flatOp) {
	op := fo.op
	if op.Cond == nil || op.Body == nil {
		p.addErr(sharding.Fieldf(p.field(i), "op %q (while) needs both \"cond\" and \"body\" regions", op.Name))
		return
	}
	w := &whileInfo{}
	var ok bool
	if w.cp, ok = p.ids(op.Cond.Params, i, ".cond.params"); !ok {
		return
	}
	if w.bp, ok = p.ids(op.Body.Params, i, ".body.params"); !ok {
		return
	}
	if w.br, ok = p.ids(op.Body.Returns, i, ".body.returns"); !ok {
		return
	}
	if w.cr, ok = p.ids(op.Cond.Returns, i, ".cond.returns"); !ok {
		return
	}
	for k, id := range w.cp {
		p.produce(id, i, ".cond.params", k)
	}
	for k, id := range w.bp {
		p.produce(id, i, ".body.params", k)
	}
	p.whiles[i] = w
}

// topoOrder orders the flat ops topologically (Kahn), or names an op of a cycle. A
// while's body returns are not dependencies of the while: they close the loop through
// data-flow edges, which are not ops.
func (p *preparer) topoOrder() ([]int, error) {
	flat := p.flat
	indeg := make([]int, len(flat))
	consumers := make([][]int, len(p.gs.tensors))
	for i := range flat {
		for _, id := range p.opIn[i] {
			if q := p.producer[id]; q >= 0 {
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
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		order = append(order, i)
		p.prodBuf = p.appendProduced(p.prodBuf[:0], i)
		for _, id := range p.prodBuf {
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
				return nil, sharding.Fieldf(p.field(i), "op %q is part of a dependency cycle; cycles are only allowed through a while loop's regions", flat[i].op.Name)
			}
		}
	}
	return order, nil
}

// appendProduced appends to out the tensors flat op i produces: its results and, for
// a while, its region params.
func (p *preparer) appendProduced(out []int, i int) []int {
	out = append(out, p.opOut[i]...)
	if w := p.whiles[i]; w != nil {
		out = append(append(out, w.cp...), w.bp...)
	}
	return out
}

// addNodes builds the rule of every op in order and adds its node (a while adds its
// data-flow edges), counting operand uses.
func (p *preparer) addNodes(order []int) {
	gs := p.gs
	gs.opNodes = make([]int, len(p.flat))
	gs.opNames = make([]string, len(p.flat))
	gs.opKinds = make([]string, len(p.flat))
	for i, fo := range p.flat {
		gs.opNodes[i] = -1
		gs.opNames[i] = fo.op.Name
		gs.opKinds[i] = fo.op.Kind
	}
	for _, i := range order {
		fo := p.flat[i]
		op := fo.op
		in, out := p.opIn[i], p.opOut[i]
		for _, id := range in {
			gs.tensors[id].uses++
		}
		if op.Kind == "while" {
			w := p.whiles[i]
			if err := addWhile(gs, op, p.field(i), i, in, out, w.cp, w.bp, w.br, w.cr); err != nil {
				p.addErr(err)
			}
			continue
		}
		rule, class, err := p.rule(i, in, out)
		if err != nil {
			p.addErr(err)
			continue
		}
		if rule == nil {
			continue
		}
		gs.opNodes[i] = len(gs.nodes)
		tensors := append(append(p.intsOf(len(in) + len(out))[:0], in...), out...)
		gs.nodes = append(gs.nodes, p.newNode(node{name: op.Name, kind: op.Kind, rule: rule, class: class,
			tensors: tensors, nOperands: len(in), opIndex: i}))
	}
}

// newNode returns n moved into p's current chunk of nodes (a few allocations for
// every node of the graph instead of one each).
func (p *preparer) newNode(n node) *node {
	if len(p.nodeChunk) == cap(p.nodeChunk) {
		p.nodeChunk = make([]node, 0, nodeChunkSize)
	}
	p.nodeChunk = append(p.nodeChunk, n)
	return &p.nodeChunk[len(p.nodeChunk)-1]
}

// nodeChunkSize is how many nodes newNode allocates at once.
const nodeChunkSize = 1024

// intsOf returns n zeroed ints, like make([]int, n), cut from p's current chunk (capped:
// appending to one never writes into the next).
func (p *preparer) intsOf(n int) []int {
	if n == 0 {
		return []int{}
	}
	if len(p.intChunk) < n {
		p.intChunk = make([]int, max(n, intChunkSize))
	}
	out := p.intChunk[:n:n]
	p.intChunk = p.intChunk[n:]
	return out
}

// intChunkSize is how many ints intsOf allocates at once.
const intChunkSize = 16 << 10

// rule builds the rule of flat op i, whose operand and result tensors are in and out,
// or takes it from p.rules. Only a miss builds the op's path and shape lists.
func (p *preparer) rule(i int, in, out []int) (*Rule, opClass, error) {
	p.inShapes, p.outShapes = p.appendShapes(p.inShapes[:0], in), p.appendShapes(p.outShapes[:0], out)
	op := p.flat[i].op
	if r, class, ok := p.rules.lookup(op, p.inShapes, p.outShapes); ok {
		return r, class, nil
	}
	r, class, err := buildRule(op, p.field(i), p.appendShapes(nil, in), p.appendShapes(nil, out))
	if err == nil {
		p.rules.store(r, class)
	}
	return r, class, err
}

// appendShapes appends the shapes of tensors ids to dst.
func (p *preparer) appendShapes(dst [][]int64, ids []int) [][]int64 {
	for _, id := range ids {
		dst = append(dst, p.gs.tensors[id].shape)
	}
	return dst
}

// indexUsers fills each node's per-tensor element counts, the users of every tensor and
// the nodes' multiUse flags. The counts depend only on the rule, so nodes sharing a rule
// (ruleCache) share one read-only slice of them.
func (p *preparer) indexUsers() {
	gs := p.gs
	gs.users = p.userLists()
	elems := map[*Rule][]int64{}
	for ni, n := range gs.nodes {
		if n.elems = elems[n.rule]; n.elems == nil {
			n.elems = ruleElems(n.rule, len(n.tensors))
			elems[n.rule] = n.elems
		}
		for q, id := range n.tensors {
			// Nodes come in order: id is new to this node unless its last user is ni
			// (a linear test, where searching the node's earlier tensors was quadratic
			// in its operands).
			if u := gs.users[id]; len(u) == 0 || u[len(u)-1] != ni {
				gs.users[id] = append(gs.users[id], ni)
			}
			if q < n.nOperands && !n.edge && len(gs.tensors[id].shape) > 0 && gs.tensors[id].uses > 1 {
				n.multiUse = true
			}
		}
	}
}

// userLists returns an empty list per tensor (nil for a tensor no node touches), with
// room for its users: one allocation for all of them rather than growing tens of thousands
// of small lists.
func (p *preparer) userLists() [][]int {
	gs := p.gs
	counts := make([]int, len(gs.tensors))
	last := make([]int, len(gs.tensors)) // per tensor, 1 + the last node counted
	total := 0
	for ni, n := range gs.nodes {
		for _, id := range n.tensors {
			if last[id] != ni+1 {
				last[id] = ni + 1
				counts[id]++
				total++
			}
		}
	}
	users := make([][]int, len(gs.tensors))
	backing := make([]int, total)
	for id, c := range counts {
		if c > 0 {
			users[id], backing = backing[:0:c], backing[c:]
		}
	}
	return users
}

// ruleElems is, per tensor of rule r (nt of them), the product of its factor sizes.
func ruleElems(r *Rule, nt int) []int64 {
	out := make([]int64, nt)
	for q := range out {
		e := int64(1)
		for _, fs := range r.Dims(q) {
			for _, f := range fs {
				e *= r.FactorSizes[f]
			}
		}
		out[q] = e
	}
	return out
}

// addWhile checks a while op's shapes and adds one data-flow edge node per result:
// sources (operand i, body return i) -> targets (result i, body param i, cond param i).
func addWhile(gs *graphState, op *Op, field string, opIdx int, in, out, cp, bp, br, cr []int) error {
	n := len(in)
	check := func(list []int, what string) error {
		if len(list) != n {
			return sharding.Fieldf(field+"."+what, "op %q (while): has %d entries but the loop carries %d values", op.Name, len(list), n)
		}
		for k, id := range list {
			if !slices.Equal(gs.tensors[id].shape, gs.tensors[in[k]].shape) {
				return sharding.Fieldf(field+"."+what+"["+strconv.Itoa(k)+"]", "op %q (while): tensor %q has shape %v but operand %d has %v", op.Name, gs.tensors[id].name, gs.tensors[id].shape, k, gs.tensors[in[k]].shape)
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
		return sharding.Fieldf(field+".cond.returns", "op %q (while): the condition must return one scalar predicate", op.Name)
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
		gs.nodes = append(gs.nodes, &node{name: op.Name, kind: "while", rule: r,
			class: classPassThrough, tensors: ids, nOperands: 2, edge: true, opIndex: opIdx})
	}
	return nil
}
