package sharding

import (
	"strings"
)

// PartitionSpecText prints s as JAX's PartitionSpec: P('D', ('X','Y'), None), with
// unreduced axes as unreduced={'U'}. Like HLO it describes the layout: open flags,
// priorities and explicit replication are not printed. It reports false when s uses a
// sub-axis, which a PartitionSpec cannot name.
func (s Sharding) PartitionSpecText() (string, bool) {
	parts := make([]string, 0, len(s.Dims)+1)
	quoted := func(refs []AxisRef) (string, bool) {
		qs := make([]string, len(refs))
		for k, r := range refs {
			if !r.IsFull() {
				return "", false
			}
			qs[k] = "'" + r.Name + "'"
		}
		return strings.Join(qs, ","), true
	}
	for _, d := range s.Dims {
		q, ok := quoted(d.Axes)
		switch {
		case !ok:
			return "", false
		case len(d.Axes) == 0:
			parts = append(parts, "None")
		case len(d.Axes) == 1:
			parts = append(parts, q)
		default:
			parts = append(parts, "("+q+")")
		}
	}
	if len(s.Unreduced) > 0 {
		q, ok := quoted(s.Unreduced)
		if !ok {
			return "", false
		}
		parts = append(parts, "unreduced={"+q+"}")
	}
	return "P(" + strings.Join(parts, ", ") + ")", true
}

// isPartitionSpecText reports whether text starts like a PartitionSpec: P(...),
// PartitionSpec(...), jax.sharding.PartitionSpec(...).
func isPartitionSpecText(text string) bool {
	t := strings.TrimSpace(text)
	for _, prefix := range []string{"jax.sharding.", "sharding.", "jax."} {
		t = strings.TrimPrefix(t, prefix)
	}
	t, ok := strings.CutPrefix(t, "PartitionSpec")
	if !ok {
		t, ok = strings.CutPrefix(t, "P")
	}
	return ok && strings.HasPrefix(strings.TrimSpace(t), "(")
}

// ParsePartitionSpecText parses JAX's PartitionSpec as Python prints or writes it:
// P('x', None, ('y','z')), PartitionSpec(...) (optionally jax.sharding.-qualified),
// strings in single or double quotes, P.UNCONSTRAINED for an open dim and
// unreduced={'u'}. As in JAX, a spec with fewer entries than the tensor's rank leaves
// the trailing dims replicated. Errors name field and the character offset.
func ParsePartitionSpecText(text string, m *Mesh, shape []int64, field string) (Sharding, error) {
	p := &textParser{s: text, field: field, m: m}
	s, pt, err := p.partitionSpec()
	if err != nil {
		return Sharding{}, err
	}
	if !p.atEnd() {
		return Sharding{}, p.fail("unexpected %q after the PartitionSpec", p.s[p.pos:min(len(p.s), p.pos+10)])
	}
	return finishSpec(s, pt, m, shape)
}

// partitionSpec parses P(...) at p.pos and leaves p after its ')'.
func (p *textParser) partitionSpec() (Sharding, *textPather, error) {
	pt := &textPather{field: p.field}
	p.skip()
	for _, prefix := range []string{"jax.sharding.", "sharding.", "jax."} {
		if strings.HasPrefix(p.s[p.pos:], prefix) {
			p.pos += len(prefix)
		}
	}
	switch {
	case strings.HasPrefix(p.s[p.pos:], "PartitionSpec"):
		p.pos += len("PartitionSpec")
	case strings.HasPrefix(p.s[p.pos:], "P"):
		p.pos++
	default:
		return Sharding{}, nil, p.fail("expected P(...) or PartitionSpec(...)")
	}
	if err := p.expect('('); err != nil {
		return Sharding{}, nil, err
	}
	var s Sharding
	for p.peek() != ')' {
		p.skip()
		off := p.pos
		if w := p.pyWord(); w == "unreduced" {
			if err := p.expect('='); err != nil {
				return Sharding{}, nil, err
			}
			refs, offs, err := p.pyAxisGroup("{[(", "}])")
			if err != nil {
				return Sharding{}, nil, err
			}
			s.Unreduced, pt.unr = append(s.Unreduced, refs...), append(pt.unr, offs...)
		} else {
			if len(s.Unreduced) > 0 {
				return Sharding{}, nil, p.failAt(off, "a dim entry after unreduced=; positional entries come first")
			}
			ds := DimSharding{Priority: NoPriority}
			var offs []int
			switch {
			case w == "None":
			case w == "P.UNCONSTRAINED" || w == "PartitionSpec.UNCONSTRAINED":
				ds.Open = true
			case w != "":
				return Sharding{}, nil, p.failAt(off, "unexpected %q; a PartitionSpec entry is None, 'axis', ('a','b'), P.UNCONSTRAINED or unreduced={...}", w)
			case p.peek() == '(':
				var err error
				if ds.Axes, offs, err = p.pyAxisGroup("(", ")"); err != nil {
					return Sharding{}, nil, err
				}
			default:
				r, off, err := p.pyAxis()
				if err != nil {
					return Sharding{}, nil, err
				}
				ds.Axes, offs = []AxisRef{r}, []int{off}
			}
			pt.dims, pt.refs = append(pt.dims, off), append(pt.refs, offs)
			s.Dims = append(s.Dims, ds)
		}
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if p.peek() != ')' {
			if p.pos >= len(p.s) {
				return Sharding{}, nil, p.fail("expected ',' or ')', found the end")
			}
			return Sharding{}, nil, p.fail("expected ',' or ')'")
		}
	}
	p.pos++
	return s, pt, nil
}

// finishSpec pads a parsed PartitionSpec to the tensor's rank and validates it.
func finishSpec(s Sharding, pt *textPather, m *Mesh, shape []int64) (Sharding, error) {
	s.Dims = padSpec(s.Dims, shape)
	for len(pt.dims) < len(s.Dims) {
		pt.dims, pt.refs = append(pt.dims, 0), append(pt.refs, nil)
	}
	return finish(s, m, shape, pt)
}

// padSpec appends replicated dims up to the tensor's rank (shape nil: none), as JAX does
// for a PartitionSpec shorter than the rank.
func padSpec(dims []DimSharding, shape []int64) []DimSharding {
	for len(dims) < len(shape) {
		dims = append(dims, DimSharding{Priority: NoPriority})
	}
	return dims
}

// pyWord reads a Python identifier, dots included ("None", "P.UNCONSTRAINED").
func (p *textParser) pyWord() string {
	p.skip()
	start := p.pos
	for p.pos < len(p.s) && (isIdent(p.s[p.pos]) || p.s[p.pos] == '.') {
		p.pos++
	}
	return p.s[start:p.pos]
}

// pyAxis reads a quoted axis name ('x' or "x"; "x:(m)k" for a sub-axis).
func (p *textParser) pyAxis() (AxisRef, int, error) {
	p.skip()
	start := p.pos
	q := p.peek()
	if q != '\'' && q != '"' {
		return AxisRef{}, start, p.fail("expected a quoted axis name, None or a tuple of axis names")
	}
	p.pos++
	end := strings.IndexByte(p.s[p.pos:], q)
	if end < 0 {
		return AxisRef{}, start, p.fail("unterminated axis name")
	}
	name := p.s[p.pos : p.pos+end]
	p.pos += end + 1
	r, err := ParseAxisRef(name, p.m, p.field)
	if err != nil {
		return AxisRef{}, start, p.failAt(start, "%s", err.(*FieldError).Message)
	}
	return r, start, nil
}

// pyAxisGroup reads a bracketed, comma-separated list of quoted axis names, opened by
// one of opens and closed by the matching byte of closes.
func (p *textParser) pyAxisGroup(opens, closes string) ([]AxisRef, []int, error) {
	k := strings.IndexByte(opens, p.peek())
	if k < 0 {
		return nil, nil, p.fail("expected one of %s", opens)
	}
	p.pos++
	var refs []AxisRef
	var offs []int
	for p.peek() != closes[k] {
		r, off, err := p.pyAxis()
		if err != nil {
			return nil, nil, err
		}
		refs, offs = append(refs, r), append(offs, off)
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if p.peek() != closes[k] {
			return nil, nil, p.fail("expected ',' or '%c'", closes[k])
		}
	}
	p.pos++
	return refs, offs, nil
}
