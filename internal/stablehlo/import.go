package stablehlo

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Options select what Import reads.
type Options struct {
	// Function is the function to import (default "main", or the module's only public
	// function).
	Function string
	// Mesh is the request's mesh, used when the module declares none (GSPMD modules
	// with mhlo.sharding only). When both exist they must have the same layout.
	Mesh   *sharding.Mesh
	Limits Limits
}

// OpaqueOp is an op the import does not model: a barrier nothing propagates through.
type OpaqueOp struct {
	Op      string   `json:"op"`
	Results []string `json:"results"`
	Line    int      `json:"line"`
	Column  int      `json:"column"`
}

// Import is a module imported as a propagation graph: tensor ids are the SSA names
// without '%' (arg0, 0, 1#1), the function's results are result0, result1, ...; ops are
// named by their first result (a function result's identity op by the result id).
type Import struct {
	Module   *Module
	Func     *Func
	Mesh     *sharding.Mesh
	Graph    *propagation.Graph
	Opaque   []OpaqueOp
	opPos    map[string]int  // op name -> position of the op in Src
	opOf     map[string]*Op  // tensor id -> op defining it (top level and regions)
	declared map[string]bool // mesh names declared in the module
	// defs are the ops of the function's own text (inlined callees excluded) with the
	// tensor ids of their results, for Annotate.
	defs []opDef
}

type opDef struct {
	op  *Op
	ids []string
}

// Read parses src and imports one function as a graph against opts. Every error is a
// *sharding.FieldError (or sharding.Errors) on Field naming the line and column.
func Read(src string, opts Options) (*Import, error) {
	m, err := Parse(src, opts.Limits)
	if err != nil {
		return nil, err
	}
	return FromModule(m, opts)
}

// FromModule imports one function of a parsed module.
func FromModule(mod *Module, opts Options) (*Import, error) {
	b := &builder{
		imp: &Import{Module: mod, opPos: map[string]int{}, opOf: map[string]*Op{}, declared: map[string]bool{}},
		lim: opts.Limits.withDefaults(), funcs: map[string]*Func{},
		ids: map[string]bool{},
	}
	for _, f := range mod.Funcs {
		b.funcs[f.Name] = f
	}
	fn, err := pickFunction(mod, opts.Function)
	if err != nil {
		return nil, err
	}
	b.imp.Func = fn
	if err := b.pickMesh(fn, opts.Mesh); err != nil {
		return nil, err
	}
	b.imp.Graph = &propagation.Graph{Tensors: map[string]*propagation.Tensor{}}
	b.function(fn)
	if b.err != nil {
		return nil, b.err
	}
	return b.imp, nil
}

func (b *builder) errAt(pos int, format string, args ...any) {
	if b.err != nil {
		return
	}
	line, col := lineCol(b.imp.Module.Src, pos)
	b.err = sharding.Fieldf(Field, "line %d, column %d: "+format, append([]any{line, col}, args...)...)
}

func pickFunction(mod *Module, name string) (*Func, error) {
	var names []string
	for _, f := range mod.Funcs {
		if f.Body == nil {
			continue
		}
		names = append(names, "@"+f.Name)
		if name != "" && f.Name == name {
			return f, nil
		}
	}
	if name == "" {
		for _, f := range mod.Funcs {
			if f.Name == "main" && f.Body != nil {
				return f, nil
			}
		}
		if len(names) == 1 {
			for _, f := range mod.Funcs {
				if f.Body != nil {
					return f, nil
				}
			}
		}
	}
	if len(names) == 0 {
		return nil, sharding.Fieldf("function", "the module defines no function with a body; there is nothing to plan")
	}
	if name == "" {
		return nil, sharding.Fieldf("function", "the module has no @main and %d functions (%s); name one in \"function\"", len(names), strings.Join(names, ", "))
	}
	return nil, sharding.Fieldf("function", "the module has no function @%s; it defines %s", name, strings.Join(names, ", "))
}

type builder struct {
	imp   *Import
	lim   Limits
	funcs map[string]*Func
	ids   map[string]bool
	err   error
	mesh  *sharding.Mesh
	stack []string // functions being inlined
	nops  int
}

var meshRefRE = regexp.MustCompile(`^#?(?:sdy\.)?(?:sharding(?:_per_value)?)?<\[?<?@([A-Za-z_][A-Za-z0-9_.$-]*)`)

// pickMesh chooses the one mesh the function's sdy shardings use (meshes without axes,
// Shardy's maximal meshes, are ignored), or the request's.
func (b *builder) pickMesh(fn *Func, req *sharding.Mesh) error {
	decls := map[string]*MeshDecl{}
	for _, d := range b.imp.Module.Meshes {
		decls[d.Name] = d
		b.imp.declared[d.Name] = true
	}
	used := map[string]int{}
	var order []string
	note := func(text string, pos int) {
		if mm := meshRefRE.FindStringSubmatch(text); mm != nil {
			if d, ok := decls[mm[1]]; ok && len(d.Axes) == 0 {
				return
			}
			if _, seen := used[mm[1]]; !seen {
				used[mm[1]] = pos
				order = append(order, mm[1])
			}
		}
	}
	var walkOps func(ops []*Op, depth int)
	seenFn := map[string]bool{}
	var walkFn func(f *Func, depth int)
	walkFn = func(f *Func, depth int) {
		if seenFn[f.Name] || depth > b.lim.MaxDepth {
			return
		}
		seenFn[f.Name] = true
		for _, p := range slices.Concat(f.Args, f.Results) {
			if r, ok := p.Attrs.Vals["sdy.sharding"].(Raw); ok {
				note(r.Text, p.Attrs.Pos["sdy.sharding"])
			}
		}
		if f.Body != nil {
			walkOps(f.Body.Ops, depth)
		}
	}
	walkOps = func(ops []*Op, depth int) {
		for _, op := range ops {
			if r, ok := op.Attrs.Vals["sdy.sharding"].(Raw); ok {
				note(r.Text, op.Attrs.Pos["sdy.sharding"])
			}
			if op.Name == "sdy.sharding_constraint" || op.Name == "sdy.reshard" {
				if text, pos, _, ok := constraintSharding(op); ok {
					note(text, pos)
				}
			}
			if op.Name == "func.call" {
				if callee := calleeOf(op); callee != "" && b.funcs[callee] != nil {
					walkFn(b.funcs[callee], depth+1)
				}
			}
			for _, r := range op.Regions {
				walkOps(r.Ops, depth+1)
			}
		}
	}
	walkFn(fn, 0)
	if len(order) > 1 {
		b.errAt(used[order[1]], "function @%s uses %d meshes (@%s); shardplan plans on one mesh per request", fn.Name, len(order), strings.Join(order, ", @"))
		return b.err
	}
	if len(order) == 0 {
		// No sdy sharding: the request's mesh, or the module's only mesh.
		var withAxes []*MeshDecl
		for _, d := range b.imp.Module.Meshes {
			if len(d.Axes) > 0 {
				withAxes = append(withAxes, d)
			}
		}
		switch {
		case req != nil:
			b.mesh, b.imp.Mesh = req, req
			return nil
		case len(withAxes) == 1:
			order = []string{withAxes[0].Name}
			used[withAxes[0].Name] = withAxes[0].Pos
		default:
			return sharding.Fieldf("mesh", "is required: the module declares no sdy.mesh its function uses; give the request's \"mesh\" or declare sdy.mesh @mesh = <[\"x\"=2, ...]>")
		}
	}
	name := order[0]
	d, ok := decls[name]
	if !ok {
		b.errAt(used[name], "mesh @%s is not declared; add sdy.mesh @%s = <[\"x\"=2, ...]>", name, name)
		return b.err
	}
	if len(d.Axes) > b.lim.MaxMeshAxes {
		b.errAt(d.Pos, "mesh @%s has %d axes; the limit is %d (SHARDPLAN_MAX_MESH_AXES)", name, len(d.Axes), b.lim.MaxMeshAxes)
		return b.err
	}
	axes := make([]sharding.Axis, len(d.Axes))
	n := int64(1)
	for i, a := range d.Axes {
		axes[i] = sharding.Axis{Name: a.Name, Size: a.Size}
		if a.Size > 0 {
			n *= int64(a.Size)
		}
		if n > int64(b.lim.MaxDevices) {
			b.errAt(d.Pos, "mesh @%s has more than %d devices; the limit is %d (SHARDPLAN_MAX_DEVICES)", name, b.lim.MaxDevices, b.lim.MaxDevices)
			return b.err
		}
	}
	m, err := sharding.NewMesh(name, axes, d.DeviceIDs)
	if err != nil {
		es, _ := sharding.AsFieldErrors(err)
		var msgs []string
		for _, e := range es {
			msgs = append(msgs, e.Error())
		}
		b.errAt(d.Pos, "mesh @%s: %s", name, strings.Join(msgs, "; "))
		return b.err
	}
	if req != nil && !req.SameLayout(m) {
		return sharding.Fieldf("mesh", "the request's mesh %s differs from the module's sdy.mesh @%s (%s); leave \"mesh\" out to use the module's", req.String(), name, m.String())
	}
	b.mesh = m
	b.imp.Mesh = m
	return nil
}

// env maps SSA names of one function instance to tensor ids ("" for non-tensor values).
type env struct {
	vals   map[string]string
	prefix string // id prefix of an inlined function ("relu@2/")
}

func (b *builder) unique(id string) string {
	if len(b.ids) >= b.lim.MaxTensors && b.err == nil {
		// Inlined calls multiply a module's values: stop at the limit.
		b.errAt(0, "the graph has more than %d tensors (calls inlined); the limit is configurable (SHARDPLAN_MAX_GRAPH_TENSORS)", b.lim.MaxTensors)
	}
	if !b.ids[id] {
		b.ids[id] = true
		return id
	}
	for k := 1; ; k++ {
		c := id + "~" + strconv.Itoa(k)
		if !b.ids[c] {
			b.ids[c] = true
			return c
		}
	}
}

// define adds a tensor for an SSA value and returns its id ("" for a non-tensor type).
func (b *builder) define(e *env, name string, ty Type) string {
	if !ty.Tensor {
		e.vals[name] = ""
		return ""
	}
	id := b.unique(e.prefix + name)
	e.vals[name] = id
	b.imp.Graph.Tensors[id] = &propagation.Tensor{Shape: ty.Shape, ElemBits: elemBits(ty.Elem)}
	return id
}

func elemBits(elem string) int {
	switch {
	case elem == "i1":
		return 8
	case strings.HasPrefix(elem, "complex<f64"):
		return 128
	case strings.HasPrefix(elem, "complex<"):
		return 64
	case strings.HasPrefix(elem, "f8"), strings.HasPrefix(elem, "f6"), strings.HasPrefix(elem, "f4"):
		return 8
	}
	digits := strings.TrimLeft(elem, "abcdefghijklmnopqrstuvwxyz")
	if n, err := strconv.Atoi(digits); err == nil && n > 0 && n <= 128 {
		return n
	}
	return 32
}

func (b *builder) function(fn *Func) {
	g := b.imp.Graph
	e := &env{vals: map[string]string{}}
	for i, a := range fn.Args {
		name := a.Name
		if name == "" {
			name = "arg" + strconv.Itoa(i)
		}
		id := b.define(e, name, a.Type)
		if id == "" {
			continue
		}
		g.Inputs = append(g.Inputs, id)
		b.annotateParam(id, a, "argument %"+name)
	}
	ret := b.ops(e, fn.Body.Ops, &g.Ops, fn.Name)
	if b.err != nil {
		return
	}
	if len(ret) != len(fn.Results) && ret != nil {
		b.errAt(fn.Pos, "function @%s returns %d values but declares %d results", fn.Name, len(ret), len(fn.Results))
		return
	}
	for k, r := range fn.Results {
		if k >= len(ret) || ret[k] == "" || !r.Type.Tensor {
			continue
		}
		id := b.unique("result" + strconv.Itoa(k))
		src := g.Tensors[ret[k]]
		if !slices.Equal(src.Shape, r.Type.Shape) {
			b.errAt(fn.Pos, "result %d of @%s has type %s but the returned value has shape %v", k, fn.Name, r.Type.Text, src.Shape)
			return
		}
		g.Tensors[id] = &propagation.Tensor{Shape: r.Type.Shape, ElemBits: elemBits(r.Type.Elem)}
		b.annotateParam(id, r, "result "+strconv.Itoa(k))
		g.Ops = append(g.Ops, propagation.Op{Name: id, Kind: "copy", Operands: []string{ret[k]}, Results: []string{id}})
		b.imp.opPos[id] = fn.ResultsStart
		g.Outputs = append(g.Outputs, id)
	}
}

// annotateParam sets tensor id's sharding from a parameter's sdy.sharding or
// mhlo.sharding attribute.
func (b *builder) annotateParam(id string, p *Param, what string) {
	t := b.imp.Graph.Tensors[id]
	if r, ok := p.Attrs.Vals["sdy.sharding"].(Raw); ok {
		t.Sharding = b.sdySharding(strings.TrimPrefix(r.Text, "#sdy."), p.Attrs.Pos["sdy.sharding"]+len("#sdy."), t.Shape, what)
		return
	}
	if s, ok := p.Attrs.Vals["mhlo.sharding"].(string); ok {
		t.Sharding = b.hloSharding(s, p.Attrs.Pos["mhlo.sharding"], t.Shape, what)
	}
}

var customRE = regexp.MustCompile(`,\s*custom\s*$`)

var offsetRE = regexp.MustCompile(`^at offset (\d+)(.*)$`)

// sdySharding parses "sharding<@mesh, [...]>" found at pos in Src; nil when it is bound
// to a mesh without axes.
func (b *builder) sdySharding(text string, pos int, shape []int64, what string) *sharding.Sharding {
	if mm := meshRefRE.FindStringSubmatch(text); mm != nil && b.mesh != nil && mm[1] != b.mesh.Name {
		for _, d := range b.imp.Module.Meshes {
			if d.Name == mm[1] && len(d.Axes) == 0 {
				// A sharding on a mesh without axes (Shardy's empty or maximal mesh)
				// has no axes either: it keeps its open and closed dims on the
				// function's mesh, as Shardy replaces it.
				i := strings.Index(text, "@"+mm[1])
				text = text[:i] + "@" + b.mesh.Name + text[i+1+len(mm[1]):]
				pos -= len(b.mesh.Name) - len(mm[1])
				break
			}
		}
	}
	if b.mesh == nil {
		b.errAt(pos, "%s has an sdy sharding but no mesh is known", what)
		return nil
	}
	s, err := sharding.ParseText(text, b.mesh, shape, Field)
	if err != nil {
		b.shardingErr(err, pos, what)
		return nil
	}
	return &s
}

func (b *builder) shardingErr(err error, pos int, what string) {
	es, _ := sharding.AsFieldErrors(err)
	if len(es) == 0 {
		b.errAt(pos, "%s: %v", what, err)
		return
	}
	msg := es[0].Message
	at := pos
	if mm := offsetRE.FindStringSubmatch(msg); mm != nil {
		if off, e := strconv.Atoi(mm[1]); e == nil {
			at = pos + off
			msg = strings.TrimPrefix(mm[2], ": ")
			msg = strings.TrimPrefix(msg, " ")
		}
	}
	b.errAt(at, "sharding of %s: %s", what, msg)
}

func (b *builder) hloSharding(text string, pos int, shape []int64, what string) *sharding.Sharding {
	if b.mesh == nil {
		b.errAt(pos, "%s has an mhlo.sharding but no mesh is known; give the request's \"mesh\"", what)
		return nil
	}
	s, err := sharding.ParseHLO(text, b.mesh, shape, Field)
	if err != nil {
		b.shardingErr(err, pos+1, what)
		return nil
	}
	return &s
}

// splitTop splits s at commas outside brackets, returning each part's offset.
func splitTop(s string) ([]string, []int) {
	var parts []string
	var offs []int
	depth, start := 0, 0
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '-' && i+1 < len(s) && s[i+1] == '>':
			i++
		case strings.IndexByte("([{<", c) >= 0:
			depth++
		case strings.IndexByte(")]}>", c) >= 0:
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, s[start:i])
			offs = append(offs, start)
			start = i + 1
		}
	}
	if strings.TrimSpace(s[start:]) != "" || len(parts) > 0 {
		parts = append(parts, s[start:])
		offs = append(offs, start)
	}
	return parts, offs
}

// perValue reads a #sdy.sharding_per_value<[<@mesh, [...]>, ...]> (attribute attr of op,
// whose text starts at pos in Src) onto the result tensors.
func (b *builder) perValue(op *Op, attr, text string, pos int, results []string) {
	g := b.imp.Graph
	const pre = "#sdy.sharding_per_value<["
	if !strings.HasPrefix(text, pre) || !strings.HasSuffix(text, "]>") {
		b.errAt(pos, "%s must be #sdy.sharding_per_value<[<@mesh, [...]>, ...]>", attr)
		return
	}
	inner := text[len(pre) : len(text)-2]
	parts, offs := splitTop(inner)
	if len(parts) != len(results) {
		b.errAt(pos, "%s has %d shardings but %s has %d results", attr, len(parts), op.Name, len(results))
		return
	}
	for k, part := range parts {
		if results[k] == "" {
			continue
		}
		lead := len(part) - len(strings.TrimLeft(part, " \t\r\n"))
		t := g.Tensors[results[k]]
		t.Sharding = b.sdySharding("sharding"+strings.TrimSpace(part), pos+len(pre)+offs[k]+lead-len("sharding"), t.Shape, "%"+results[k])
	}
}

// resultShardings reads an op's sdy.sharding (sharding_per_value) or mhlo.sharding for
// its results.
func (b *builder) resultShardings(op *Op, results []string) {
	g := b.imp.Graph
	if r, ok := op.Attrs.Vals["sdy.sharding"].(Raw); ok {
		b.perValue(op, "sdy.sharding", r.Text, op.Attrs.Pos["sdy.sharding"], results)
		return
	}
	if op.Name == "sdy.manual_computation" {
		// Opaque, but its out_shardings are the global layouts of its results:
		// [<@mesh, ...>, ...] in the pretty form, #sdy.sharding_per_value<...> in the
		// generic one.
		switch v := op.Attrs.Vals["out_shardings"].(type) {
		case Raw:
			b.perValue(op, "out_shardings", v.Text, op.Attrs.Pos["out_shardings"], results)
		case []any:
			// The list's text, wrapped so its '[' lands at its own offset.
			const wrap = "#sdy.sharding_per_value<"
			pos := op.Attrs.Pos["out_shardings"]
			b.perValue(op, "out_shardings", wrap+b.imp.Module.Src[pos:op.Attrs.KeySpan["out_shardings"].End]+">", pos-len(wrap), results)
		}
		return
	}
	if s, ok := op.Attrs.Vals["mhlo.sharding"].(string); ok {
		pos := op.Attrs.Pos["mhlo.sharding"]
		if b.mesh == nil {
			b.errAt(pos, "%s has an mhlo.sharding but no mesh is known; give the request's \"mesh\"", op.Name)
			return
		}
		shapes := make([][]int64, len(results))
		for k, id := range results {
			if id == "" {
				return // a non-tensor result: the sharding is not read
			}
			shapes[k] = g.Tensors[id].Shape
		}
		shs, err := sharding.ParseHLOTuple(s, b.mesh, shapes, Field)
		if err != nil {
			b.shardingErr(err, pos+1, "%"+strings.Join(results, ", %"))
			return
		}
		for k, id := range results {
			g.Tensors[id].Sharding = &shs[k]
		}
	}
}

// constraintSharding is the sharding of an sdy.sharding_constraint or sdy.reshard: the
// pretty form's <@mesh, [...]> ("sharding" prefixed) or the generic form's sharding
// property, with the position of its "sharding<" text (ok false when there is none).
func constraintSharding(op *Op) (text string, pos int, span Span, ok bool) {
	for _, ps := range op.Positional {
		if r, isRaw := ps.v.(Raw); isRaw && strings.HasPrefix(r.Text, "<") {
			return "sharding" + r.Text, ps.pos - len("sharding"), Span{ps.pos, ps.pos + len(r.Text)}, true
		}
	}
	if r, isRaw := op.Attrs.Vals["sharding"].(Raw); isRaw && strings.HasPrefix(r.Text, "#sdy.sharding<") {
		return strings.TrimPrefix(r.Text, "#sdy."), op.Attrs.Pos["sharding"] + len("#sdy."), op.Attrs.KeySpan["sharding"], true
	}
	if r, isRaw := op.Attrs.Vals["sharding"].(Raw); isRaw && strings.HasPrefix(r.Text, "<@") {
		// sdy.data_flow_edge %x sharding=<@mesh, [...]>
		pos := op.Attrs.Pos["sharding"]
		return "sharding" + r.Text, pos - len("sharding"), Span{pos, pos + len(r.Text)}, true
	}
	return "", 0, Span{}, false
}

func calleeOf(op *Op) string {
	if s, ok := op.Attrs.Vals["call_target_name"].(string); ok {
		return s
	}
	for _, p := range op.Positional {
		if s, ok := p.v.(Symbol); ok {
			return s.Name
		}
	}
	for _, k := range []string{"callee", "decomposition"} {
		if s, ok := op.Attrs.Vals[k].(Symbol); ok {
			return s.Name
		}
	}
	return ""
}

// ops imports a block's ops into out and returns the ids its terminator returns (nil
// when it has none).
func (b *builder) ops(e *env, ops []*Op, out *[]propagation.Op, fnName string) []string {
	var ret []string
	for _, op := range ops {
		if b.err != nil {
			return nil
		}
		b.nops++
		if b.nops > b.lim.MaxOps {
			b.errAt(op.Pos, "the graph has more than %d ops (calls inlined); the limit is configurable (SHARDPLAN_MAX_GRAPH_OPS)", b.lim.MaxOps)
			return nil
		}
		switch op.Name {
		case "func.return", "stablehlo.return", "sdy.return", "mhlo.return":
			ret = ret[:0]
			for _, v := range op.Operands {
				ret = append(ret, b.use(e, v, op.Pos))
			}
			continue
		}
		b.op(e, op, out)
	}
	return ret
}

// use resolves an SSA use to its tensor id ("" for a non-tensor value).
func (b *builder) use(e *env, v string, pos int) string {
	id, ok := e.vals[v]
	if !ok {
		b.errAt(pos, "%%%s is used but not defined (before this op)", v)
	}
	return id
}

// kindOf maps an op to a propagation kind ("" when it is not modelled).
func kindOf(op *Op) string {
	name := op.Name
	switch name {
	case "sdy.sharding_constraint", "sdy.reshard":
		return "sharding_constraint"
	case "sdy.data_flow_edge":
		return "copy"
	case "sdy.constant":
		return "constant"
	case "stablehlo.optimization_barrier":
		return "barrier"
	case "chlo.erf", "chlo.tan":
		// CHLO's elementwise ops that have a StableHLO-named twin in the graph API
		return strings.TrimPrefix(name, "chlo.")
	case "stablehlo.custom_call":
		if calleeOf(op) == "Sharding" {
			return "sharding_constraint"
		}
		return withRule(op)
	case "stablehlo.while":
		return "while"
	}
	k, ok := strings.CutPrefix(name, "stablehlo.")
	if !ok || k == "custom" || k == "sharding_constraint" || k == "opaque" {
		return withRule(op)
	}
	if _, ok := supported[k]; ok {
		return k
	}
	return withRule(op)
}

// withRule is "custom" for an op the import does not model that carries its own Shardy
// rule (sdy.sharding_rule, or sdy.op_sharding_rule), "" (opaque) otherwise.
func withRule(op *Op) string {
	if _, _, ok := shardingRule(op); ok {
		return "custom"
	}
	return ""
}

// shardingRule is op's #sdy.op_sharding_rule<...> attribute and its position.
func shardingRule(op *Op) (Raw, int, bool) {
	for _, k := range []string{"sdy.sharding_rule", "sdy.op_sharding_rule"} {
		if r, ok := op.Attrs.Vals[k].(Raw); ok {
			return r, op.Attrs.Pos[k], true
		}
	}
	return Raw{}, 0, false
}

var supported = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range propagation.SupportedOps() {
		m[k] = true
	}
	return m
}()

func (b *builder) op(e *env, op *Op, out *[]propagation.Op) {
	g := b.imp.Graph
	operands := make([]string, 0, len(op.Operands)+len(op.Inits))
	allTensors := true
	ins := op.Operands
	if len(op.Inits) > 0 {
		ins = slices.Concat(op.Operands, op.Inits)
	}
	for _, v := range ins {
		if _, defined := e.vals[v]; !defined && !knownDialect(op.Name) {
			continue // another dialect's syntax may define values among its operands
		}
		id := b.use(e, v, op.Pos)
		if id == "" {
			allTensors = false
			continue
		}
		operands = append(operands, id)
	}
	if b.err != nil {
		return
	}
	switch {
	case op.Name == "func.call" || op.Name == "stablehlo.composite":
		// a composite is its decomposition function
		if b.inline(e, op, operands, out) {
			return
		}
	case op.Name == "sdy.named_computation" && len(op.Regions) == 1:
		if b.inlineBody(e, op, operands, out, namedComputation(op), op.Regions[0].Args, op.Regions[0].Ops) {
			return
		}
	}
	kind := kindOf(op)
	if !knownDialect(op.Name) && kind == "" {
		// Another dialect's syntax does not say reliably which type is whose: its
		// results are opaque values.
		op.ResultTypes = make([]Type, len(op.Results))
	}
	if len(op.ResultTypes) != len(op.Results) {
		b.errAt(op.Pos, "%s defines %d results but its type gives %d", op.Name, len(op.Results), len(op.ResultTypes))
		return
	}
	for _, t := range op.ResultTypes {
		allTensors = allTensors && t.Tensor
	}
	if !allTensors {
		kind = ""
	}
	var results []string
	var ids []string
	for k, name := range op.Results {
		id := b.define(e, name, op.ResultTypes[k])
		ids = append(ids, id)
		if id != "" {
			results = append(results, id)
			b.imp.opOf[id] = op
		}
	}
	if e.prefix == "" && len(results) == len(op.Results) {
		b.imp.defs = append(b.imp.defs, opDef{op, ids})
	}
	opName := ""
	if len(results) > 0 {
		opName = results[0]
	}
	if kind == "" {
		line, col := lineCol(b.imp.Module.Src, op.Pos)
		b.imp.Opaque = append(b.imp.Opaque, OpaqueOp{Op: op.Name, Results: nonNil(results), Line: line, Column: col})
		if opName != "" {
			b.imp.opPos[opName] = op.Pos
			*out = append(*out, propagation.Op{Name: opName, Kind: "opaque", Operands: operands, Results: results})
		}
		// An op shardplan does not model may carry shardings it cannot express either
		// ({manual} around shard_map): they are dropped, never an error.
		if b.err == nil {
			b.resultShardings(op, ids)
			if b.err != nil {
				b.err = nil
				for _, id := range results {
					g.Tensors[id].Sharding = nil
				}
			}
		}
		return
	}
	b.imp.opPos[opName] = op.Pos
	pop := propagation.Op{Name: opName, Kind: kind, Operands: operands, Results: results, Attrs: attrsFor(kind, op)}
	switch kind {
	case "custom":
		r, rpos, _ := shardingRule(op)
		text := strings.TrimSpace(r.Text)
		body, ok := strings.CutPrefix(text, "#sdy.op_sharding_rule<")
		if !ok || !strings.HasSuffix(body, ">") {
			b.errAt(rpos, "sdy.sharding_rule must be #sdy.op_sharding_rule<([...])->([...]) {...}>")
			return
		}
		// Shardy prints "..., custom"; the rule reader takes the word without the comma.
		pop.Rule = customRE.ReplaceAllString(strings.TrimSuffix(body, ">"), " custom")
	case "barrier":
		// optimization_barrier is the identity on each operand: Shardy propagates
		// through it (data-flow edges); one copy op per value, named by its result.
		if len(operands) != len(results) {
			b.errAt(op.Pos, "%s has %d operands but %d results", op.Name, len(operands), len(results))
			return
		}
		b.resultShardings(op, ids)
		for k := range results {
			b.imp.opPos[results[k]] = op.Pos
			*out = append(*out, propagation.Op{Name: results[k], Kind: "copy", Operands: []string{operands[k]}, Results: []string{results[k]}})
		}
		return
	case "sharding_constraint", "copy":
		if text, pos, _, ok := constraintSharding(op); ok && op.Name != "stablehlo.custom_call" && len(results) == 1 {
			t := g.Tensors[results[0]]
			t.Sharding = b.sdySharding(text, pos, t.Shape, "%"+results[0])
		}
	case "while":
		b.while(e, op, &pop)
	}
	if b.err != nil {
		return
	}
	b.resultShardings(op, ids)
	*out = append(*out, pop)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// while imports a while op's cond and body regions. The pretty form names the region
// arguments once (%iterArg = %x) for both regions; the generic form gives each region
// its own block arguments.
func (b *builder) while(e *env, op *Op, pop *propagation.Op) {
	if len(op.Regions) != 2 {
		b.errAt(op.Pos, "stablehlo.while needs a cond and a body region, found %d regions", len(op.Regions))
		return
	}
	for ri, r := range op.Regions {
		reg := &propagation.Region{}
		var names []string
		if len(r.Args) > 0 {
			for _, a := range r.Args {
				names = append(names, a.Name)
			}
		} else {
			names = op.Bindings
		}
		if len(names) != len(op.ResultTypes) {
			b.errAt(op.Pos, "stablehlo.while has %d results but its region has %d arguments", len(op.ResultTypes), len(names))
			return
		}
		for k, n := range names {
			id := b.define(e, n, op.ResultTypes[k])
			if id == "" {
				b.errAt(op.Pos, "stablehlo.while carries a non-tensor value; only tensors are supported")
				return
			}
			reg.Params = append(reg.Params, id)
		}
		ret := b.ops(e, r.Ops, &reg.Ops, "")
		for _, id := range ret {
			if id == "" {
				b.errAt(op.Pos, "stablehlo.while returns a non-tensor value; only tensors are supported")
				return
			}
		}
		reg.Returns = ret
		if ri == 0 {
			pop.Cond = reg
		} else {
			pop.Body = reg
		}
	}
}

// inline imports a call to a function defined in the module in place: the callee's
// values get ids "callee@call/name" and an identity op connects each returned value to
// the call's result. It returns false (the call stays opaque) for external or
// recursive callees or beyond the nesting limit.
func (b *builder) inline(e *env, op *Op, operands []string, out *[]propagation.Op) bool {
	callee := b.funcs[calleeOf(op)]
	if callee == nil || callee.Body == nil || len(callee.Results) != len(op.Results) {
		return false
	}
	return b.inlineBody(e, op, operands, out, callee.Name, callee.Args, callee.Body.Ops)
}

// namedComputation is the Shardy name of sdy.named_computation<"name">, "" when absent.
func namedComputation(op *Op) string {
	if name, ok := op.Attrs.Vals["name"].(string); ok {
		return name
	}
	for _, p := range op.Positional {
		if r, ok := p.v.(Raw); ok && strings.HasPrefix(r.Text, "<\"") {
			if name, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(r.Text, "<"), ">")); err == nil {
				return name
			}
		}
	}
	return ""
}

// inlineBody imports a body (a callee's or a named computation's region) with its
// arguments bound to operands. It returns false when the body cannot be inlined.
func (b *builder) inlineBody(e *env, op *Op, operands []string, out *[]propagation.Op, name string, args []*Param, body []*Op) bool {
	if name == "" || slices.Contains(b.stack, name) || len(b.stack) >= b.lim.MaxDepth ||
		len(operands) != len(op.Operands) || len(args) != len(operands) || len(op.Results) == 0 ||
		len(op.ResultTypes) != len(op.Results) {
		return false
	}
	for _, t := range op.ResultTypes {
		if !t.Tensor {
			return false
		}
	}
	first := op.Results[0]
	ce := &env{vals: map[string]string{}, prefix: e.prefix + name + "@" + first + "/"}
	for k, a := range args {
		ce.vals[a.Name] = operands[k]
	}
	b.stack = append(b.stack, name)
	ret := b.ops(ce, body, out, name)
	b.stack = b.stack[:len(b.stack)-1]
	if b.err != nil {
		return true
	}
	if len(ret) != len(op.Results) {
		b.errAt(op.Pos, "@%s returns %d values but %s defines %d results", name, len(ret), op.Name, len(op.Results))
		return true
	}
	var ids []string
	for k, res := range op.Results {
		id := b.define(e, res, op.ResultTypes[k])
		ids = append(ids, id)
		if ret[k] == "" {
			b.errAt(op.Pos, "@%s returns a non-tensor value", name)
			return true
		}
		b.imp.opPos[id] = op.Pos
		b.imp.opOf[id] = op
		*out = append(*out, propagation.Op{Name: id, Kind: "copy", Operands: []string{ret[k]}, Results: []string{id}})
	}
	if e.prefix == "" {
		b.imp.defs = append(b.imp.defs, opDef{op, ids})
	}
	b.resultShardings(op, ids)
	return true
}

// attrNames are the attributes propagation reads; everything else is dropped.
var attrNames = map[string]bool{
	"lhs_batching_dimensions": true, "rhs_batching_dimensions": true, "lhs_contracting_dimensions": true,
	"rhs_contracting_dimensions": true, "dot_dimension_numbers": true, "broadcast_dimensions": true,
	"permutation": true, "dimensions": true, "dimension": true, "start_indices": true, "limit_indices": true,
	"strides": true, "slice_sizes": true, "edge_padding_low": true, "edge_padding_high": true,
	"interior_padding": true, "iota_dimension": true, "equation": true, "dimension_numbers": true,
	"scatter_dimension_numbers": true, "window_strides": true, "padding": true, "lhs_dilation": true,
	"rhs_dilation": true, "feature_group_count": true, "batch_group_count": true,
}

// prettyNames renames the pretty form's keyword attributes to StableHLO's attribute
// names, per op kind.
var prettyNames = map[string]map[string]string{
	"broadcast_in_dim": {"dims": "broadcast_dimensions"},
	"transpose":        {"dims": "permutation"},
	"reverse":          {"dims": "dimensions"},
	"concatenate":      {"dim": "dimension"},
	"iota":             {"dim": "iota_dimension"},
	"dynamic_slice":    {"sizes": "slice_sizes"},
	"pad":              {"low": "edge_padding_low", "high": "edge_padding_high", "interior": "interior_padding"},
	"einsum":           {"config": "equation", "einsum_config": "equation"},
	"convolution":      {"dim_numbers": "dimension_numbers"},
}

// attrsFor builds the attribute map propagation reads for op.
func attrsFor(kind string, op *Op) map[string]any {
	out := map[string]any{}
	ren := prettyNames[kind]
	for k, v := range op.Attrs.Vals {
		if n, ok := ren[k]; ok {
			k = n
		}
		switch x := v.(type) {
		case dimsPair:
			switch k {
			case "batching_dims":
				out["lhs_batching_dimensions"], out["rhs_batching_dimensions"] = x.L, x.R
			case "contracting_dims":
				out["lhs_contracting_dimensions"], out["rhs_contracting_dimensions"] = x.L, x.R
			}
			continue
		case map[string]any:
			if k == "window" && kind == "convolution" {
				for wk, wn := range map[string]string{"stride": "window_strides", "pad": "padding", "lhs_dilate": "lhs_dilation", "rhs_dilate": "rhs_dilation"} {
					if wv, ok := x[wk]; ok {
						out[wn] = wv
					}
				}
				continue
			}
		}
		if k == "dot_dimension_numbers" {
			if m, ok := v.(map[string]any); ok {
				for dk, dv := range m { // flat, as the pretty form gives them
					if attrNames[dk] {
						out[dk] = dv
					}
				}
				continue
			}
		}
		if attrNames[k] {
			out[k] = v
		}
	}
	if kind == "slice" && len(op.Slice) > 0 {
		var s, l, st []any
		for _, r := range op.Slice {
			s, l, st = append(s, r[0]), append(l, r[1]), append(st, r[2])
		}
		out["start_indices"], out["limit_indices"], out["strides"] = s, l, st
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Locate rewrites the field errors of propagating imp.Graph ("ops[3].attrs.x", op
// "5") to name the module, the line and column of the op and its SSA name.
func (imp *Import) Locate(err error) error {
	es, ok := sharding.AsFieldErrors(err)
	if !ok {
		return err
	}
	out := make(sharding.Errors, 0, len(es))
	for _, fe := range es {
		pos, msg := imp.Func.Pos, fe.Error()
		if p, ok := imp.opPos[imp.opAt(fe.Field)]; ok {
			pos, msg = p, fe.Message
		} else if t, isTensor := strings.CutPrefix(fe.Field, "tensors."); isTensor {
			id := t // SSA names may hold dots: cut the field's own suffix
			for _, suffix := range []string{".sharding", ".shape", ".dtype"} {
				if i := strings.LastIndex(t, suffix); i > 0 {
					id = t[:i]
					break
				}
			}
			if o := imp.opOf[id]; o != nil {
				pos = o.Pos
			}
			msg = "%" + id + ": " + fe.Message
		}
		line, col := lineCol(imp.Module.Src, pos)
		out = append(out, sharding.Fieldf(Field, "line %d, column %d: %s", line, col, msg))
	}
	return out
}

var opPathRE = regexp.MustCompile(`^((?:ops\[\d+\](?:\.(?:cond|body)\.)?)+)`)

// opAt finds the op a wire path ("ops[2].body.ops[1].attrs.x") names.
func (imp *Import) opAt(field string) string {
	m := opPathRE.FindString(field)
	if m == "" {
		return ""
	}
	ops := imp.Graph.Ops
	var cur *propagation.Op
	for _, part := range strings.Split(strings.TrimSuffix(m, "."), ".") {
		switch {
		case strings.HasPrefix(part, "ops["):
			i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(part, "ops["), "]"))
			if err != nil || i >= len(ops) {
				return ""
			}
			cur = &ops[i]
		case part == "cond" && cur != nil && cur.Cond != nil:
			ops = cur.Cond.Ops
		case part == "body" && cur != nil && cur.Body != nil:
			ops = cur.Body.Ops
		default:
			return ""
		}
	}
	if cur == nil {
		return ""
	}
	return cur.Name
}
