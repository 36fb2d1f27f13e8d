package stablehlo

import (
	"context"
	"math"
	"strconv"
	"strings"
	"unicode"

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
	ctx    context.Context
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
// message starts with "line L, column C", or ctx's error once ctx is done (checked every
// ctxCheckEvery ops). Parse never panics and runs in time linear in len(src).
func Parse(ctx context.Context, src string, lim Limits) (*Module, error) {
	p := &parser{ctx: ctx, lx: lexer{src: src}, src: src, lim: lim.withDefaults()}
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
	p.stop(sharding.Fieldf(Field, "line %d, column %d: "+format, append([]any{line, col}, args...)...))
}

// stop ends the parse with err: the token stream ends, so every loop does.
func (p *parser) stop(err error) {
	p.err = err
	p.lx.pos = len(p.src)
	p.tok = token{kind: tEOF, pos: len(p.src)}
}

// ctxCheckEvery is how many ops the parser and the import handle between two looks at
// their context.
const ctxCheckEvery = 1024

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
			// #alias = attr, !alias = type; #loc aliases are kept for ResolveLoc.
			p.advance()
			if !p.expect("=") {
				return
			}
			switch {
			case t.kind == tBang:
				p.typ()
			case p.tok.kind == tIdent && p.tok.text == "loc":
				if m.LocAliases == nil {
					m.LocAliases = map[string]string{}
				}
				m.LocAliases[t.text] = p.loc()
			default:
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
		a.Loc = p.loc()
	}
}

func (p *parser) skipLoc() { p.loc() }

// loc reads loc(...) and returns the text between its parentheses.
func (p *parser) loc() string {
	p.advance() // loc
	if !p.tok.is("(") {
		return ""
	}
	text := p.balanced()
	if len(text) >= 2 {
		text = text[1 : len(text)-1]
	}
	return text
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
		start := p.tok.pos
		text := p.balanced()
		ty, bad := parseTensorType(text)
		if bad >= 0 && p.err == nil {
			dim := text[bad:]
			if i := strings.IndexByte(dim, 'x'); i >= 0 {
				dim = dim[:i]
			}
			p.failAt(start+bad, "tensor dimension %s is negative; a dimension is a size >= 0 (or ? when dynamic)", dim)
		}
		return ty
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
// unranked tensor gives a non-tensor Type (opaque to propagation). A static dim is kept
// however large (one past int64 as math.MaxInt64): the service's size limit refuses the
// value by name. bad is the offset in text of a negative dim ("<-2xf32>"), which no
// tensor has, and -1 when there is none.
func parseTensorType(text string) (ty Type, bad int) {
	ty = Type{Text: "tensor" + text}
	body := strings.TrimSuffix(strings.TrimPrefix(text, "<"), ">")
	if i := strings.IndexByte(body, ','); i >= 0 {
		body = body[:i] // encoding (#stablehlo.bounds<...>) ignored
	}
	body = strings.TrimRightFunc(body, unicode.IsSpace)
	off := 1 // where body starts in text
	trimmed := strings.TrimLeftFunc(body, unicode.IsSpace)
	off, body = off+len(body)-len(trimmed), trimmed
	if i := negativeDim(body); i >= 0 {
		return ty, off + i
	}
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
		if err != nil {
			n = math.MaxInt64 // past int64: the size limit names the value
		}
		shape = append(shape, n)
		body = body[j+1:]
	}
	if body == "" || strings.ContainsAny(body, "?*x<") && !strings.HasPrefix(body, "complex<") {
		return ty, -1
	}
	ty.Tensor, ty.Shape, ty.Elem = true, shape, body
	return ty, -1
}

// negativeDim is the offset in a tensor type's dims ("?x-2xf32") of a dim with a minus
// sign, or -1. Only the dims before the element type are looked at (an element type's
// own parameters, e.g. a quantization's zero point, may be negative).
func negativeDim(dims string) int {
	if i := strings.IndexByte(dims, '<'); i >= 0 {
		dims = dims[:i]
	}
	for i := 0; i+1 < len(dims); i++ {
		if dims[i] == '-' && isDigit(dims[i+1]) && (i == 0 || dims[i-1] == 'x') {
			return i
		}
	}
	return -1
}
