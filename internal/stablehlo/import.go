package stablehlo

import (
	"context"
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
	// lines finds the line of an offset in Module.Src (lineCol).
	lines lineIndex
}

// lineCol is the 1-based line and column of byte offset off of the module's text.
func (imp *Import) lineCol(off int) (int, int) { return imp.lines.lineCol(imp.Module.Src, off) }

type opDef struct {
	op  *Op
	ids []string
}

// Read parses src and imports one function as a graph against opts. Every error is a
// *sharding.FieldError (or sharding.Errors) on Field naming the line and column, or
// ctx's error once ctx is done (checked every 1,024 ops as it parses and as it
// imports).
func Read(ctx context.Context, src string, opts Options) (*Import, error) {
	m, err := Parse(ctx, src, opts.Limits)
	if err != nil {
		return nil, err
	}
	return FromModule(ctx, m, opts)
}

// FromModule imports one function of a parsed module, or returns ctx's error once ctx
// is done.
func FromModule(ctx context.Context, mod *Module, opts Options) (*Import, error) {
	b := &builder{ctx: ctx,
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
	line, col := b.imp.lineCol(pos)
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
	ctx   context.Context
	imp   *Import
	lim   Limits
	funcs map[string]*Func
	ids   map[string]bool
	err   error
	mesh  *sharding.Mesh
	stack []string // functions being inlined
	nops  int
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
	if n := len(fn.Body.Ops); n == 0 || !isReturn(fn.Body.Ops[n-1].Name) {
		pos := fn.Pos
		if n > 0 {
			pos = fn.Body.Ops[n-1].Pos
		}
		b.errAt(pos, "function @%s ends without a terminator: its body's last op must be return (func.return)", fn.Name)
		return
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

func isReturn(op string) bool {
	switch op {
	case "func.return", "stablehlo.return", "sdy.return", "mhlo.return":
		return true
	}
	return false
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
		line, col := imp.lineCol(pos)
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
