package stablehlo

import (
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// Limits bound what Parse and Import accept, so a hostile module cannot exhaust the
// stack or the heap. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	// MaxDepth bounds nesting: regions, brackets of attribute values and call inlining.
	MaxDepth int
	// MaxOps bounds the ops parsed and the ops of the imported graph (calls inlined).
	MaxOps int
	// MaxTensors bounds the values ops define (%0:N counts N) and the tensors of the
	// imported graph.
	MaxTensors int
	// MaxDevices and MaxMeshAxes bound the mesh taken from sdy.mesh.
	MaxDevices  int
	MaxMeshAxes int
}

// DefaultLimits are generous for real programs.
func DefaultLimits() Limits {
	return Limits{MaxDepth: 64, MaxOps: 200000, MaxTensors: 400000, MaxDevices: 65536, MaxMeshAxes: 8}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxOps <= 0 {
		l.MaxOps = d.MaxOps
	}
	if l.MaxDevices <= 0 {
		l.MaxDevices = d.MaxDevices
	}
	if l.MaxTensors <= 0 {
		l.MaxTensors = d.MaxTensors
	}
	if l.MaxMeshAxes <= 0 {
		l.MaxMeshAxes = d.MaxMeshAxes
	}
	return l
}

// Field is the wire field every module error names.
const Field = "module"

type parser struct {
	lx     lexer
	tok    token
	src    string
	lim    Limits
	depth  int
	ops    int
	values int // values defined by ops so far
	err    error
}

// Parse reads MLIR text (the pretty-printed form of jax's as_text() and Shardy's tests,
// or the generic form) into a Module. Every error is a *sharding.FieldError on Field whose
// message starts with "line L, column C". Parse never panics and runs in time linear in
// len(src).
func Parse(src string, lim Limits) (*Module, error) {
	p := &parser{lx: lexer{src: src}, src: src, lim: lim.withDefaults()}
	p.advance()
	m := &Module{Src: src}
	p.topLevel(m, false)
	if p.err != nil {
		return nil, p.err
	}
	return m, nil
}

func (p *parser) advance() { p.tok = p.lx.next() }

// peek returns the token after the current one without consuming anything.
func (p *parser) peek() token {
	save := p.lx.pos
	t := p.lx.next()
	p.lx.pos = save
	return t
}

func (p *parser) failAt(pos int, format string, args ...any) {
	if p.err != nil {
		return
	}
	line, col := lineCol(p.src, pos)
	p.err = sharding.Fieldf(Field, "line %d, column %d: "+format, append([]any{line, col}, args...)...)
	// Stop the token stream so every loop ends.
	p.lx.pos = len(p.src)
	p.tok = token{kind: tEOF, pos: len(p.src)}
}

func (p *parser) fail(format string, args ...any) { p.failAt(p.tok.pos, format, args...) }

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the module"
	case tValue:
		return "%" + t.text
	case tSymbol:
		return "@" + t.text
	case tHash:
		return "#" + t.text
	case tString:
		return strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

func (p *parser) expect(punct string) bool {
	if p.err != nil {
		return false
	}
	if !p.tok.is(punct) {
		p.fail("expected '%s', found %s", punct, describe(p.tok))
		return false
	}
	p.advance()
	return true
}

func (p *parser) enter() bool {
	p.depth++
	if p.depth > p.lim.MaxDepth {
		p.fail("nesting deeper than %d levels; the limit is configurable (SHARDPLAN_MAX_MODULE_DEPTH)", p.lim.MaxDepth)
		return false
	}
	return true
}

func (p *parser) leave() { p.depth-- }

// topLevel parses module-level items until EOF (or '}' when nested in a module op).
func (p *parser) topLevel(m *Module, nested bool) {
	for p.err == nil {
		t := p.tok
		switch {
		case t.kind == tEOF:
			if nested {
				p.fail("expected '}' closing the module")
			}
			return
		case t.is("}") && nested:
			p.advance()
			return
		case t.kind == tIdent && t.text == "module" || t.kind == tIdent && t.text == "builtin.module":
			p.advance()
			if p.tok.kind == tSymbol {
				p.advance()
			}
			if p.tok.kind == tIdent && p.tok.text == "attributes" {
				p.advance()
				p.dict(nil)
			}
			if p.tok.kind == tIdent && p.tok.text == "loc" {
				p.skipLoc()
			}
			if !p.tok.is("{") {
				p.fail("expected '{' opening the module body, found %s", describe(p.tok))
				return
			}
			m.BodyStart = p.tok.pos + 1
			p.advance()
			if !p.enter() {
				return
			}
			p.topLevel(m, true)
			p.leave()
			if p.tok.kind == tIdent && p.tok.text == "loc" {
				p.skipLoc()
			}
		case t.kind == tIdent && t.text == "sdy.mesh":
			p.mesh(m)
		case t.kind == tIdent && (t.text == "func.func" || t.text == "func"):
			p.function(m)
		case t.kind == tHash || t.kind == tBang:
			// #alias = attr, !alias = type
			p.advance()
			if !p.expect("=") {
				return
			}
			if t.kind == tBang {
				p.typ()
			} else {
				p.value(true)
			}
		default:
			op := p.op()
			if op == nil && p.err == nil {
				p.fail("unexpected %s at module level", describe(t))
			}
			if op != nil {
				p.lift(m, op, 0)
			}
		}
	}
}

// lift takes the module-level ops of the generic form into m: "builtin.module" (its
// ops), "sdy.mesh" and "func.func".
func (p *parser) lift(m *Module, op *Op, depth int) {
	switch op.Name {
	case "builtin.module":
		if len(op.Regions) == 1 && depth < p.lim.MaxDepth {
			m.BodyStart = op.Regions[0].Start
			for _, o := range op.Regions[0].Ops {
				p.lift(m, o, depth+1)
			}
		}
	case "sdy.mesh":
		name, _ := op.Attrs.Vals["sym_name"].(string)
		if d, ok := op.Attrs.Vals["mesh"].(*MeshDecl); ok && name != "" {
			d.Name, d.Pos = name, op.Pos
			m.Meshes = append(m.Meshes, d)
		}
	case "func.func":
		name, _ := op.Attrs.Vals["sym_name"].(string)
		ft, ok := op.Attrs.Vals["function_type"].(funcType)
		if name == "" || !ok {
			return
		}
		f := &Func{Name: name, Pos: op.Pos}
		argAttrs, _ := op.Attrs.Vals["arg_attrs"].([]any)
		resAttrs, _ := op.Attrs.Vals["res_attrs"].([]any)
		param := func(ty Type, attrs []any, i int, field string) *Param {
			pa := &Param{Type: ty, Dict: Span{-1, -1}}
			if i < len(attrs) {
				if d, ok := attrs[i].(map[string]any); ok {
					for k, v := range d {
						pa.Attrs.set(k, v, op.Attrs.Pos[field], Span{-1, -1})
					}
				}
			}
			return pa
		}
		if len(op.Regions) == 1 && len(op.Regions[0].Ops) > 0 {
			f.Body = op.Regions[0]
			for i, a := range f.Body.Args {
				pa := param(a.Type, argAttrs, i, "arg_attrs")
				pa.Name = a.Name
				f.Args = append(f.Args, pa)
			}
		} else {
			for i, ty := range ft.Args {
				f.Args = append(f.Args, param(ty, argAttrs, i, "arg_attrs"))
			}
		}
		for i, ty := range ft.Results {
			f.Results = append(f.Results, param(ty, resAttrs, i, "res_attrs"))
		}
		f.ResultsStart, f.ResultsEnd = -1, -1
		m.Funcs = append(m.Funcs, f)
	}
}

// mesh parses sdy.mesh @name = <["x"=2, "y"=4], device_ids=[...]>.
func (p *parser) mesh(m *Module) {
	d := &MeshDecl{Pos: p.tok.pos}
	p.advance()
	var ok bool
	if d.Name, ok = p.symbol("the mesh name"); !ok || !p.expect("=") {
		return
	}
	if p.tok.kind == tHash && p.tok.text == "sdy.mesh" {
		p.advance()
	}
	p.meshBody(d)
	if p.err == nil {
		m.Meshes = append(m.Meshes, d)
	}
	if p.tok.kind == tIdent && p.tok.text == "loc" {
		p.skipLoc()
	}
}

// meshBody parses <["x"=2, ...], device_ids=[...]> into d.
func (p *parser) meshBody(d *MeshDecl) {
	if !p.expect("<") || !p.expect("[") {
		return
	}
	for p.err == nil && !p.tok.is("]") {
		if p.tok.kind != tString {
			p.fail("expected a mesh axis \"name\"=size, found %s", describe(p.tok))
			return
		}
		ax := MeshAxis{Name: p.tok.text}
		p.advance()
		if !p.expect("=") {
			return
		}
		n, ok := p.intTok()
		if !ok {
			return
		}
		ax.Size = n
		d.Axes = append(d.Axes, ax)
		if p.tok.is(",") {
			p.advance()
		}
	}
	p.expect("]")
	for p.err == nil && p.tok.is(",") {
		p.advance()
		if p.tok.kind != tIdent || p.tok.text != "device_ids" {
			p.fail("expected device_ids=[...] in the mesh, found %s", describe(p.tok))
			return
		}
		p.advance()
		if !p.expect("=") || !p.expect("[") {
			return
		}
		d.DeviceIDs = []int{}
		for p.err == nil && !p.tok.is("]") {
			n, ok := p.intTok()
			if !ok {
				return
			}
			d.DeviceIDs = append(d.DeviceIDs, n)
			if p.tok.is(",") {
				p.advance()
			}
		}
		p.expect("]")
	}
	p.expect(">")
}

// symbol reads @name; what names it in the error.
func (p *parser) symbol(what string) (string, bool) {
	if p.tok.kind != tSymbol {
		p.fail("expected %s (@name), found %s", what, describe(p.tok))
		return "", false
	}
	name := p.tok.text
	p.advance()
	return name, true
}

func (p *parser) intTok() (int, bool) {
	if p.tok.kind != tInt {
		p.fail("expected an integer, found %s", describe(p.tok))
		return 0, false
	}
	n, err := strconv.ParseInt(p.tok.text, 0, 32)
	if err != nil {
		p.fail("integer %s is out of range", p.tok.text)
		return 0, false
	}
	p.advance()
	return int(n), true
}

// function parses func.func [visibility] @name(args) [-> results] [attributes {...}] [{body}].
func (p *parser) function(m *Module) {
	f := &Func{Pos: p.tok.pos}
	p.advance()
	if p.tok.kind == tIdent && (p.tok.text == "public" || p.tok.text == "private" || p.tok.text == "nested") {
		p.advance()
	}
	var ok bool
	if f.Name, ok = p.symbol("the function name"); !ok || !p.expect("(") {
		return
	}
	p.list(")", "the argument list", func() {
		a := &Param{}
		if p.tok.kind == tValue {
			a.Name = p.tok.text
			p.advance()
			if !p.expect(":") {
				return
			}
		}
		a.Type = p.typ()
		p.paramAttrs(a)
		f.Args = append(f.Args, a)
	})
	if p.tok.kind == tArrow {
		p.advance()
		f.ResultsStart = p.tok.pos
		if p.tok.is("(") {
			f.ResultsParen = true
			p.advance()
			p.list(")", "the result list", func() {
				r := &Param{Type: p.typ()}
				p.paramAttrs(r)
				f.Results = append(f.Results, r)
			})
			f.ResultsEnd = p.lx.lastEnd(p.tok)
		} else {
			r := &Param{Type: p.typ()}
			r.Dict = Span{p.lx.lastEnd(p.tok), p.lx.lastEnd(p.tok)}
			f.Results = append(f.Results, r)
			f.ResultsEnd = r.Dict.Start
		}
	}
	if p.tok.kind == tIdent && p.tok.text == "attributes" {
		p.advance()
		p.dict(nil)
	}
	if p.tok.is("{") {
		f.Body = p.region()
	}
	if p.tok.kind == tIdent && p.tok.text == "loc" {
		p.skipLoc()
	}
	if p.err == nil {
		m.Funcs = append(m.Funcs, f)
	}
}

// lastEnd is the end offset of the token before t: the position right after the text
// preceding t's leading whitespace.
func (l *lexer) lastEnd(t token) int {
	i := t.pos
	for i > 0 && strings.IndexByte(" \t\r\n", l.src[i-1]) >= 0 {
		i--
	}
	return i
}

// paramAttrs reads an optional {dict} and loc(...) after a parameter's type.
func (p *parser) paramAttrs(a *Param) {
	if p.tok.is("{") {
		a.Dict.Start = p.tok.pos
		p.dict(&a.Attrs)
		a.Dict.End = p.lx.lastEnd(p.tok)
	} else {
		a.Dict = Span{p.lx.lastEnd(p.tok), p.lx.lastEnd(p.tok)}
	}
	if p.tok.kind == tIdent && p.tok.text == "loc" {
		p.skipLoc()
	}
}

func (p *parser) skipLoc() {
	p.advance() // loc
	if p.tok.is("(") {
		p.balanced()
	}
}

// balanced skips a bracketed group starting at the current token ('(', '[', '{' or '<')
// and returns its text. It is iterative, so deep nesting costs no stack.
func (p *parser) balanced() string {
	start := p.tok.pos
	depth := 0
	for p.err == nil {
		t := p.tok
		switch {
		case t.kind == tEOF:
			p.failAt(start, "unclosed '%s'", p.src[start:start+1])
			return ""
		case t.kind == tPunct && strings.Contains("([{<", t.text):
			depth++
		case t.kind == tPunct && strings.Contains(")]}>", t.text):
			depth--
		}
		end := p.lx.pos
		p.advance()
		if depth == 0 {
			return p.src[start:end]
		}
	}
	return ""
}

// region parses { [^bb0(args):] ops } and returns it.
func (p *parser) region() *Region {
	r := &Region{Start: p.tok.pos + 1}
	if !p.expect("{") || !p.enter() {
		return r
	}
	defer p.leave()
	for p.err == nil {
		switch {
		case p.tok.is("}"):
			p.advance()
			return r
		case p.tok.kind == tEOF:
			p.fail("expected '}' closing the region")
			return r
		case p.tok.kind == tCaret:
			p.advance()
			if p.tok.is("(") {
				args := p.blockArgs()
				if len(r.Args) == 0 && len(r.Ops) == 0 {
					r.Args = args
				}
			}
			p.expect(":")
		default:
			op := p.op()
			if op == nil {
				if p.err == nil {
					p.fail("expected an op, found %s", describe(p.tok))
				}
				return r
			}
			r.Ops = append(r.Ops, op)
		}
	}
	return r
}

// blockArgs parses (%a: type [loc], ...).
func (p *parser) blockArgs() []*Param {
	var out []*Param
	p.expect("(")
	p.list(")", "the block arguments", func() {
		if p.tok.kind != tValue {
			p.fail("expected a block argument (%%name: type), found %s", describe(p.tok))
			return
		}
		a := &Param{Name: p.tok.text}
		p.advance()
		if !p.expect(":") {
			return
		}
		a.Type = p.typ()
		p.paramAttrs(a)
		out = append(out, a)
	})
	return out
}

// list parses item, then more items after commas, up to the closing punctuation, which
// it consumes; what names the list in errors.
func (p *parser) list(closing, what string, item func()) {
	for p.err == nil && !p.tok.is(closing) {
		item()
		if p.err != nil {
			return
		}
		if p.tok.is(",") {
			p.advance()
		} else if !p.tok.is(closing) {
			p.fail("expected ',' or '%s' in %s, found %s", closing, what, describe(p.tok))
			return
		}
	}
	p.expect(closing)
}

// typ parses one type.
func (p *parser) typ() Type {
	t := p.tok
	switch {
	case t.kind == tIdent && t.text == "tensor" && p.peek().is("<"):
		p.advance()
		text := p.balanced()
		return parseTensorType(text)
	case t.kind == tIdent:
		p.advance()
		if p.tok.is("<") && !p.tok.nl {
			return Type{Text: t.text + p.balanced()}
		}
		return Type{Text: t.text}
	case t.kind == tBang:
		p.advance()
		text := "!" + t.text
		if p.tok.is("<") && p.tok.pos == t.pos+len(text) {
			text += p.balanced()
		}
		return Type{Text: text}
	case t.is("("):
		return Type{Text: p.balanced()}
	}
	p.fail("expected a type, found %s", describe(t))
	return Type{}
}

// parseTensorType reads "<8x16xf32>" (with its angle brackets). A dynamic dim (?) or an
// unranked tensor gives a non-tensor Type (opaque to propagation).
func parseTensorType(text string) Type {
	ty := Type{Text: "tensor" + text}
	body := strings.TrimSuffix(strings.TrimPrefix(text, "<"), ">")
	if i := strings.IndexByte(body, ','); i >= 0 {
		body = body[:i] // encoding (#stablehlo.bounds<...>) ignored
	}
	body = strings.TrimSpace(body)
	shape := []int64{}
	for {
		j := 0
		for j < len(body) && isDigit(body[j]) {
			j++
		}
		if j == 0 || j >= len(body) || body[j] != 'x' {
			break
		}
		n, err := strconv.ParseInt(body[:j], 10, 64)
		if err != nil || n > 1<<40 {
			return ty
		}
		shape = append(shape, n)
		body = body[j+1:]
	}
	if body == "" || strings.ContainsAny(body, "?*x<") && !strings.HasPrefix(body, "complex<") {
		return ty
	}
	ty.Tensor, ty.Shape, ty.Elem = true, shape, body
	return ty
}

// startsStatement reports whether the current token, first on its line, begins a new op.
func (p *parser) startsStatement() bool {
	t := p.tok
	if !t.nl {
		return false
	}
	switch t.kind {
	case tValue:
		n := p.peek()
		return n.is("=") || n.is(":") && p.peekN(2).kind == tInt
	case tCaret:
		return true
	case tString:
		return p.peek().is("(")
	case tIdent:
		if t.text == "return" || t.text == "loc" {
			return t.text == "return"
		}
		n := p.peek()
		return strings.Contains(t.text, ".") && !n.is("=") && !n.is(",") && !n.is(":")
	}
	return false
}

func (p *parser) peekN(n int) token {
	save := p.lx.pos
	var t token
	for range n {
		t = p.lx.next()
	}
	p.lx.pos = save
	return t
}

// op parses one operation statement, or returns nil (error set) when there is none.
func (p *parser) op() *Op {
	if p.err != nil {
		return nil
	}
	p.ops++
	if p.ops > p.lim.MaxOps {
		p.fail("more than %d ops; the limit is configurable (SHARDPLAN_MAX_GRAPH_OPS)", p.lim.MaxOps)
		return nil
	}
	op := &Op{Pos: p.tok.pos}
	if p.tok.kind == tValue {
		for p.err == nil && p.tok.kind == tValue {
			name := p.tok.text
			p.advance()
			n := 1
			if p.tok.is(":") {
				p.advance()
				k, ok := p.intTok()
				if !ok {
					return nil
				}
				if k < 1 || k > 1<<16 {
					p.failAt(op.Pos, "%%%s:%d: the result count must be between 1 and 65536", name, k)
					return nil
				}
				if p.values += k; p.values > p.lim.MaxTensors {
					p.failAt(op.Pos, "the ops define more than %d values; the limit is configurable (SHARDPLAN_MAX_GRAPH_TENSORS)", p.lim.MaxTensors)
					return nil
				}
				n = k
				for i := range n {
					op.Results = append(op.Results, name+"#"+strconv.Itoa(i))
				}
			} else {
				op.Results = append(op.Results, name)
				if p.values++; p.values > p.lim.MaxTensors {
					p.failAt(op.Pos, "the ops define more than %d values; the limit is configurable (SHARDPLAN_MAX_GRAPH_TENSORS)", p.lim.MaxTensors)
					return nil
				}
			}
			if p.tok.is(",") {
				p.advance()
			}
		}
		if !p.expect("=") {
			return nil
		}
	}
	switch p.tok.kind {
	case tString:
		op.Name, op.Generic = p.tok.text, true
		p.advance()
		p.genericOp(op)
	case tIdent:
		op.Name = p.tok.text
		if op.Name == "return" {
			op.Name = "func.return"
		}
		if op.Name == "call" {
			op.Name = "func.call"
		}
		p.advance()
		p.prettyOp(op)
	default:
		p.fail("expected an op name, found %s", describe(p.tok))
		return nil
	}
	if p.err != nil {
		return nil
	}
	return op
}

// genericOp parses "(operands) [succ] [<{props}>] [(regions)] [{attrs}] : type [loc]".
func (p *parser) genericOp(op *Op) {
	if !p.expect("(") {
		return
	}
	for p.err == nil && !p.tok.is(")") {
		if p.tok.kind != tValue {
			p.fail("expected an operand (%%name), found %s", describe(p.tok))
			return
		}
		op.Operands = append(op.Operands, p.tok.text)
		p.advance()
		if p.tok.is(",") {
			p.advance()
		}
	}
	p.expect(")")
	if p.tok.is("[") {
		p.balanced() // successors
	}
	if p.tok.is("<") && p.peek().is("{") {
		p.advance()
		p.dict(&op.Attrs)
		p.expect(">")
	}
	if p.tok.is("(") && p.peek().is("{") {
		p.advance()
		for p.err == nil && p.tok.is("{") {
			op.Regions = append(op.Regions, p.region())
			if p.tok.is(",") {
				p.advance()
			}
		}
		p.expect(")")
	}
	op.Dict = Span{p.lx.lastEnd(p.tok), p.lx.lastEnd(p.tok)}
	if p.tok.is("{") {
		op.Dict.Start = p.tok.pos
		p.dict(&op.Attrs)
		op.Dict.End = p.lx.lastEnd(p.tok)
	}
	if !p.expect(":") {
		return
	}
	p.opType(op)
	if p.tok.kind == tIdent && p.tok.text == "loc" {
		p.skipLoc()
	}
}

// opType parses an op's trailing type: a function type, or a list of types (all the
// same for every operand and result, or one per result as in while).
func (p *parser) opType(op *Op) {
	if p.tok.is("(") {
		p.advance()
		for p.err == nil && !p.tok.is(")") {
			p.typ()
			if p.tok.is(",") {
				p.advance()
			}
		}
		p.expect(")")
		if p.tok.kind != tArrow {
			p.fail("expected '->' in the op's function type, found %s", describe(p.tok))
			return
		}
		p.advance()
		if p.tok.is("(") {
			p.advance()
			for p.err == nil && !p.tok.is(")") {
				op.ResultTypes = append(op.ResultTypes, p.typ())
				if p.tok.is(",") {
					p.advance()
				}
			}
			p.expect(")")
		} else {
			op.ResultTypes = append(op.ResultTypes, p.typ())
		}
		return
	}
	types := []Type{p.typ()}
	for p.err == nil && p.tok.is(",") {
		p.advance()
		types = append(types, p.typ())
	}
	if p.tok.kind == tArrow {
		// "T -> T" or "T -> (T, T)" (chlo.top_k): the results follow the arrow.
		p.advance()
		if p.tok.is("(") {
			p.advance()
			p.list(")", "the result types", func() { op.ResultTypes = append(op.ResultTypes, p.typ()) })
		} else {
			op.ResultTypes = append(op.ResultTypes, p.typ())
		}
		return
	}
	// One type for all, or the last len(results) of the list (select: pred, value).
	switch n := len(op.Results); {
	case n == 0:
	case len(types) == 1:
		for range n {
			op.ResultTypes = append(op.ResultTypes, types[0])
		}
	case len(types) >= n:
		op.ResultTypes = types[len(types)-n:]
	default:
		op.ResultTypes = types
	}
}

// prettyOp parses the custom assembly of an op: operands, keyword attributes, groups,
// regions and an attribute dictionary up to the trailing ": type", then what may follow
// it (reducer, cond/do regions, attributes {...}, loc).
func (p *parser) prettyOp(op *Op) {
	var pendingArgs []*Param
	op.Dict = Span{-1, -1}
	for p.err == nil {
		t := p.tok
		switch {
		case t.kind == tEOF || t.is("}") || p.startsStatement():
			if op.Dict.Start < 0 {
				op.Dict = Span{p.lx.lastEnd(t), p.lx.lastEnd(t)}
			}
			return
		case t.is(":"):
			if op.Dict.Start < 0 {
				op.Dict = Span{p.lx.lastEnd(t), p.lx.lastEnd(t)}
			}
			p.advance()
			p.opType(op)
			if op.Name == "stablehlo.while" && op.Dict.Start == op.Dict.End {
				op.Dict = Span{p.lx.lastEnd(p.tok), p.lx.lastEnd(p.tok)}
				op.DictKeyword = true
			}
			p.trailing(op)
			return
		case t.kind == tValue:
			op.Operands = append(op.Operands, t.text)
			p.advance()
		case t.is(","):
			p.advance()
		case t.is("("):
			pendingArgs = p.group(op)
		case t.is("["):
			if op.Name == "stablehlo.slice" {
				p.sliceRanges(op)
			} else {
				op.Positional = append(op.Positional, positional{p.value(false), t.pos})
			}
		case t.is("{"):
			if p.isRegion() {
				r := p.region()
				if len(r.Args) == 0 {
					r.Args = pendingArgs
				}
				pendingArgs = nil
				op.Regions = append(op.Regions, r)
			} else {
				op.Dict.Start = t.pos
				p.dict(&op.Attrs)
				op.Dict.End = p.lx.lastEnd(p.tok)
			}
		case t.is("<"):
			if p.peek().is("{") {
				p.advance()
				p.dict(&op.Attrs)
				p.expect(">")
			} else {
				op.Positional = append(op.Positional, positional{Raw{p.balanced()}, t.pos})
			}
		case t.kind == tIdent && t.text == "loc" && p.peek().is("("):
			p.skipLoc()
		case t.kind == tIdent && p.peek().is("="):
			p.keyword(op)
		case t.kind == tIdent && p.peek().is("<") && !p.peek().nl:
			op.Positional = append(op.Positional, positional{p.value(false), t.pos})
		case t.kind == tIdent:
			op.Flags = append(op.Flags, t.text)
			p.advance()
		case t.kind == tSymbol || t.kind == tString || t.kind == tInt || t.kind == tFloat || t.kind == tHash:
			op.Positional = append(op.Positional, positional{p.value(false), t.pos})
		case !knownDialect(op.Name):
			// Another dialect's custom syntax (scf.for ... = ... to ...): skip what is
			// not understood; the op is opaque anyway.
			p.advance()
		default:
			p.fail("unexpected %s in op %s", describe(t), op.Name)
			return
		}
	}
}

// knownDialect reports whether op belongs to a dialect whose printed syntax the parser
// checks strictly (StableHLO, CHLO, Shardy, func).
func knownDialect(op string) bool {
	d, _, _ := strings.Cut(op, ".")
	switch d {
	case "stablehlo", "chlo", "sdy", "func", "mhlo":
		return true
	}
	return false
}

// trailing parses what may follow an op's type: loc(...), reducer(...)(...) {region},
// cond {region} do {region}, attributes {dict}.
func (p *parser) trailing(op *Op) {
	for p.err == nil {
		t := p.tok
		switch {
		case t.kind == tIdent && t.text == "loc" && p.peek().is("("):
			p.skipLoc()
		case t.kind == tIdent && t.text == "reducer":
			p.advance()
			var args []*Param
			for p.err == nil && p.tok.is("(") {
				args = append(args, p.blockArgs()...)
			}
			r := p.region()
			r.Args = args
			op.Regions = append(op.Regions, r)
		case t.kind == tIdent && (t.text == "cond" || t.text == "do") && p.peek().is("{"):
			p.advance()
			op.Regions = append(op.Regions, p.region())
		case t.kind == tIdent && t.text == "attributes" && p.peek().is("{"):
			p.advance()
			op.Dict.Start = p.tok.pos
			p.dict(&op.Attrs)
			op.Dict.End = p.lx.lastEnd(p.tok)
		default:
			return
		}
	}
}

// isRegion tells a region ({ %x = ..., { ^bb0, { stablehlo.return) from an attribute
// dictionary ({name = value, unit}).
func (p *parser) isRegion() bool {
	n := p.peek()
	switch n.kind {
	case tValue, tCaret:
		return true
	case tIdent:
		after := p.peekN(2)
		return !(after.is("=") || after.is(",") || after.is("}"))
	case tString:
		return p.peekN(2).is("(")
	}
	return false
}

// group parses a parenthesised group of the pretty form: operands, "%a = %b" bindings
// (while), "%x init: %c" (reduce) or block arguments "%a: type". It returns the block
// arguments for a region that follows.
func (p *parser) group(op *Op) []*Param {
	var args []*Param
	p.advance()
	for p.err == nil && !p.tok.is(")") {
		t := p.tok
		switch {
		case t.kind == tValue:
			p.advance()
			switch {
			case p.tok.is("="):
				p.advance()
				if p.tok.kind != tValue {
					p.fail("expected an operand after '=', found %s", describe(p.tok))
					return nil
				}
				op.Bindings = append(op.Bindings, t.text)
				op.Operands = append(op.Operands, p.tok.text)
				p.advance()
			case p.tok.kind == tIdent && p.tok.text == "init":
				p.advance()
				if !p.expect(":") {
					return nil
				}
				if p.tok.kind != tValue {
					p.fail("expected an init value after 'init:', found %s", describe(p.tok))
					return nil
				}
				op.Operands = append(op.Operands, t.text)
				op.Inits = append(op.Inits, p.tok.text)
				p.advance()
			case p.tok.is(":"):
				p.advance()
				a := &Param{Name: t.text, Type: p.typ()}
				p.paramAttrs(a)
				args = append(args, a)
			default:
				op.Operands = append(op.Operands, t.text)
			}
		case t.is(","):
			p.advance()
		case t.kind == tIdent && p.peek().is("="):
			p.keyword(op) // an attribute inside the group: chlo.top_k(%x, k = 4)
		case t.kind == tEOF:
			p.fail("expected ')'")
			return nil
		default:
			p.value(false)
		}
	}
	p.expect(")")
	return args
}

// sliceRanges parses [start:limit(:stride), ...].
func (p *parser) sliceRanges(op *Op) {
	p.advance()
	p.list("]", "the slice ranges", func() {
		var r [3]int64
		r[2] = 1
		for k := 0; k < 3; k++ {
			if p.tok.kind != tInt {
				p.fail("expected an integer in the slice range, found %s", describe(p.tok))
				return
			}
			n, err := strconv.ParseInt(p.tok.text, 0, 64)
			if err != nil {
				p.fail("integer %s is out of range", p.tok.text)
				return
			}
			r[k] = n
			p.advance()
			if k == 2 || !p.tok.is(":") {
				break
			}
			p.advance()
		}
		op.Slice = append(op.Slice, r)
	})
}

// keyword reads a pretty-form keyword attribute "name = value" into op.
func (p *parser) keyword(op *Op) {
	t := p.tok
	p.advance()
	p.advance()
	start := p.tok.pos
	v := p.kwValue(t.text)
	op.Attrs.set(t.text, v, start, Span{t.pos, p.lx.lastEnd(p.tok)})
}

// dimsPair is "[1] x [0]" (dot_general's batching_dims and contracting_dims).
type dimsPair struct{ L, R any }

// kwValue parses the value of a pretty-form keyword attribute.
func (p *parser) kwValue(key string) any {
	if key == "dim_numbers" {
		return p.convDims()
	}
	v := p.value(false)
	if p.tok.kind == tIdent && p.tok.text == "x" && p.peek().is("[") {
		p.advance()
		return dimsPair{v, p.value(false)}
	}
	return v
}

// dict parses {name = value, unit, ...} into a (nil a: skip).
func (p *parser) dict(a *Attrs) map[string]any {
	out := map[string]any{}
	if !p.expect("{") || !p.enter() {
		return out
	}
	defer p.leave()
	p.list("}", "the attribute dictionary", func() {
		t := p.tok
		if t.kind != tIdent && t.kind != tString {
			p.fail("expected an attribute name, found %s", describe(t))
			return
		}
		p.advance()
		var v any = true
		start := p.tok.pos
		if p.tok.is("=") {
			p.advance()
			start = p.tok.pos
			v = p.value(true)
		}
		out[t.text] = v
		if a != nil {
			a.set(t.text, v, start, Span{t.pos, p.lx.lastEnd(p.tok)})
		}
	})
	return out
}

// value parses one attribute value. typeSuffix allows a trailing ": type" (attribute
// dictionaries print "0 : i64"; the pretty form's keyword attributes do not).
func (p *parser) value(typeSuffix bool) any {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	v := p.valueNoSuffix(typeSuffix)
	if typeSuffix && p.tok.is(":") {
		p.advance()
		ty := p.typ()
		if d, ok := v.(denseVal); ok {
			return d.expand(ty)
		}
	}
	if d, ok := v.(denseVal); ok {
		return d.elems
	}
	return v
}

// denseVal is a dense<...> literal before its type expands a splat.
type denseVal struct {
	elems any
	splat bool
}

func (d denseVal) expand(ty Type) any {
	if !d.splat || !ty.Tensor {
		return d.elems
	}
	// Only small splats (convolution padding) are expanded, so a short text never
	// allocates much.
	n := int64(1)
	for _, s := range ty.Shape {
		if s > 1024 {
			return d.elems
		}
		if n *= s; n > 1024 {
			return d.elems
		}
	}
	var build func(dims []int64) any
	build = func(dims []int64) any {
		if len(dims) == 0 {
			return d.elems
		}
		out := make([]any, dims[0])
		for i := range out {
			out[i] = build(dims[1:])
		}
		return out
	}
	return build(ty.Shape)
}

func (p *parser) valueNoSuffix(typeSuffix bool) any {
	t := p.tok
	switch t.kind {
	case tInt:
		p.advance()
		n, err := strconv.ParseInt(t.text, 0, 64)
		if err != nil {
			return Raw{t.text}
		}
		return n
	case tFloat:
		p.advance()
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return Raw{t.text}
		}
		return f
	case tString:
		p.advance()
		return t.text
	case tSymbol:
		p.advance()
		return Symbol{t.text}
	case tValue:
		// an SSA use inside another dialect's attribute syntax (tensor.extract %t[%i])
		p.advance()
		return Raw{"%" + t.text}
	case tBang:
		return Raw{p.typ().Text}
	case tHash:
		p.advance()
		if !p.tok.is("<") || p.tok.pos != t.pos+1+len(t.text) {
			return Raw{"#" + t.text}
		}
		switch t.text {
		case "stablehlo.dot", "stablehlo.gather", "stablehlo.scatter", "stablehlo.dot_algorithm":
			p.advance()
			m := p.fields(t.text)
			p.expect(">")
			return m
		case "sdy.mesh":
			d := &MeshDecl{}
			p.meshBody(d)
			return d
		case "stablehlo.conv":
			p.advance()
			var m any
			if p.tok.kind == tIdent && p.tok.text == "raw" {
				p.advance()
				m = p.fields(t.text)
			} else {
				m = p.convDims()
			}
			p.expect(">")
			return m
		}
		return Raw{"#" + t.text + p.balanced()}
	case tPunct:
		switch t.text {
		case "[":
			p.advance()
			out := []any{}
			p.list("]", "the list", func() { out = append(out, p.value(typeSuffix)) })
			return out
		case "{":
			return p.dict(nil)
		case "(":
			return p.funcTypeOrRaw()
		case "<":
			return Raw{p.balanced()}
		}
	case tIdent:
		p.advance()
		switch t.text {
		case "true":
			return true
		case "false":
			return false
		case "array":
			if p.tok.is("<") {
				return p.denseArray()
			}
		case "dense":
			if p.tok.is("<") {
				return p.dense()
			}
		}
		if (p.tok.is("<") || p.tok.is("(")) && p.tok.pos == t.pos+len(t.text) {
			return Raw{t.text + p.balanced()}
		}
		return Raw{t.text}
	}
	p.fail("expected an attribute value, found %s", describe(t))
	return nil
}

// fields parses the "name = value, ..." body of a dialect attribute up to its '>' (not
// consumed); attr names it in errors.
func (p *parser) fields(attr string) map[string]any {
	m := map[string]any{}
	for p.err == nil && !p.tok.is(">") {
		if p.tok.kind != tIdent {
			p.fail("expected a field name in #%s<...>, found %s", attr, describe(p.tok))
			return m
		}
		k := p.tok.text
		p.advance()
		if !p.expect("=") {
			return m
		}
		m[k] = p.value(true)
		if p.tok.is(",") {
			p.advance()
		}
	}
	return m
}

// funcTypeOrRaw parses "(types) -> type" or "(types) -> (types)" as a funcType, or keeps
// any other parenthesised value as text.
func (p *parser) funcTypeOrRaw() any {
	save, tok := p.lx.pos, p.tok
	text := p.balanced()
	if p.tok.kind != tArrow {
		return Raw{text}
	}
	p.lx.pos, p.tok = save, tok
	var ft funcType
	p.advance() // (
	p.list(")", "the function type's inputs", func() { ft.Args = append(ft.Args, p.typ()) })
	p.advance() // ->
	if p.tok.is("(") {
		p.advance()
		p.list(")", "the function type's results", func() { ft.Results = append(ft.Results, p.typ()) })
	} else {
		ft.Results = append(ft.Results, p.typ())
	}
	return ft
}

// denseArray parses array<i64: 1, 2> (after "array").
func (p *parser) denseArray() any {
	p.advance() // <
	p.typ()
	out := []any{}
	if p.tok.is(":") {
		p.advance()
		for p.err == nil && !p.tok.is(">") {
			out = append(out, p.valueNoSuffix(false))
			if p.tok.is(",") {
				p.advance()
			}
		}
	}
	p.expect(">")
	return out
}

// dense parses dense<...> (after "dense"): a nested list of numbers, a splat, or a hex
// string (kept raw).
func (p *parser) dense() any {
	p.advance() // <
	if p.tok.is(">") {
		p.advance()
		return denseVal{elems: []any{}}
	}
	v := p.value(false)
	p.expect(">")
	_, isList := v.([]any)
	return denseVal{elems: v, splat: !isList}
}

// convDims parses [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f] into convolution dimension
// numbers.
func (p *parser) convDims() any {
	start := p.tok.pos
	part := func() []any {
		if !p.expect("[") {
			return nil
		}
		var out []any
		for p.err == nil && !p.tok.is("]") {
			switch p.tok.kind {
			case tInt:
				n, _ := strconv.ParseInt(p.tok.text, 10, 64)
				out = append(out, n)
			case tIdent:
				out = append(out, p.tok.text)
			default:
				p.fail("expected a dim label (b, f, i, o or a spatial index), found %s", describe(p.tok))
				return nil
			}
			p.advance()
			if p.tok.is(",") {
				p.advance()
			}
		}
		p.expect("]")
		return out
	}
	in := part()
	if p.tok.kind != tIdent || p.tok.text != "x" {
		p.fail("expected 'x' between the input and kernel dims, found %s", describe(p.tok))
		return nil
	}
	p.advance()
	k := part()
	if p.tok.kind != tArrow {
		p.fail("expected '->' before the output dims, found %s", describe(p.tok))
		return nil
	}
	p.advance()
	out := part()
	if p.err != nil {
		return nil
	}
	m := map[string]any{}
	assign := func(labels []any, names map[string]string, spatial string) bool {
		sp := make([]any, 0, len(labels))
		idx := map[int64]int{}
		for pos, l := range labels {
			switch x := l.(type) {
			case string:
				name, ok := names[x]
				if !ok {
					return false
				}
				m[name] = int64(pos)
			case int64:
				idx[x] = pos
			}
		}
		for i := range int64(len(idx)) {
			pos, ok := idx[i]
			if !ok {
				return false
			}
			sp = append(sp, int64(pos))
		}
		m[spatial] = sp
		return true
	}
	if !assign(in, map[string]string{"b": "input_batch_dimension", "f": "input_feature_dimension"}, "input_spatial_dimensions") ||
		!assign(k, map[string]string{"i": "kernel_input_feature_dimension", "o": "kernel_output_feature_dimension"}, "kernel_spatial_dimensions") ||
		!assign(out, map[string]string{"b": "output_batch_dimension", "f": "output_feature_dimension"}, "output_spatial_dimensions") {
		p.failAt(start, "malformed convolution dimension numbers; write e.g. [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]")
		return nil
	}
	return m
}
