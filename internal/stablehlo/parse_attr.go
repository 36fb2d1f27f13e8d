package stablehlo

import (
	"strconv"
)

// This file parses attribute values: pretty-form keywords, dictionaries, dense
// literals and the structured attributes (dimension numbers, dense arrays).

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

// valueNoSuffix parses one attribute value at the current token, without the ": type"
// that may follow it.
func (p *parser) valueNoSuffix(typeSuffix bool) any {
	t := p.tok
	switch t.kind {
	case tInt, tFloat, tString, tSymbol, tValue:
		p.advance()
		return scalarValue(t)
	case tBang:
		return Raw{p.typ().Text}
	case tHash:
		p.advance()
		return p.hashValue(t)
	case tPunct:
		if v, ok := p.punctValue(t, typeSuffix); ok {
			return v
		}
	case tIdent:
		p.advance()
		return p.identValue(t)
	}
	p.fail("expected an attribute value, found %s", describe(t))
	return nil
}

// scalarValue is the value of a number, string, symbol or SSA-use token t; a number out
// of range stays Raw.
func scalarValue(t token) any {
	switch t.kind {
	case tInt:
		n, err := strconv.ParseInt(t.text, 0, 64)
		if err != nil {
			return Raw{t.text}
		}
		return n
	case tFloat:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return Raw{t.text}
		}
		return f
	case tString:
		return t.text
	case tSymbol:
		return Symbol{t.text}
	default:
		// an SSA use inside another dialect's attribute syntax (tensor.extract %t[%i])
		return Raw{"%" + t.text}
	}
}

// hashValue parses the rest of a "#name<...>" attribute after its name t: StableHLO's
// structured attributes become fields, an sdy.mesh a *MeshDecl, anything else Raw.
func (p *parser) hashValue(t token) any {
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
}

// punctValue parses a list, a dictionary, a function type or a "<...>" opening with t;
// it is false for any other punctuation.
func (p *parser) punctValue(t token, typeSuffix bool) (any, bool) {
	switch t.text {
	case "[":
		p.advance()
		out := []any{}
		p.list("]", "the list", func() { out = append(out, p.value(typeSuffix)) })
		return out, true
	case "{":
		return p.dict(nil), true
	case "(":
		return p.funcTypeOrRaw(), true
	case "<":
		return Raw{p.balanced()}, true
	}
	return nil, false
}

// identValue parses what follows the word t: a boolean, a dense or array literal, or a
// dialect value kept Raw.
func (p *parser) identValue(t token) any {
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
