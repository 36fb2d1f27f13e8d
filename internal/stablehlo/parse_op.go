package stablehlo

import (
	"strconv"
	"strings"
)

// This file parses one operation statement, in the generic and the pretty form.

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
	if p.ops%ctxCheckEvery == 0 && p.ctx.Err() != nil {
		p.stop(p.ctx.Err())
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
		op.Loc = p.loc()
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
			op.Loc = p.loc()
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
			op.Loc = p.loc()
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
