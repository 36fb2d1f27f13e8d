package sharding

import (
	"strconv"
	"strings"
)

// XLA's named HloSharding (V3), printed when XLA keeps Shardy's form:
//
//	{mesh[data=2,model=4], [{data}, {model:(1)2, ?}], replicated={x}, unreduced={y}}
//	{mesh[data=2,model=4], device_ids=(...), replicated}      {maximal_mesh[device_id=3]}
//
// Its mesh must be the request's (axes in order, and device_ids when it lists them).

// namedSharding reads the rest of a named HloSharding after its '{' into sp.
func (p *textParser) namedSharding(sp *hloSpec) error {
	if strings.HasPrefix(p.s[p.pos:], "maximal_mesh[") {
		return p.maximalMesh(sp)
	}
	if err := p.namedMesh(); err != nil {
		return err
	}
	pt := &textPather{field: p.field}
	s := Sharding{}
	sp.kind = hloNamed
	sawDims := false
	for p.peek() == ',' {
		p.pos++
		p.skip()
		dims, err := p.namedEntry(sp, &s, pt)
		if err != nil {
			return err
		}
		sawDims = sawDims || dims
	}
	if sp.kind == hloNamed && !sawDims {
		return p.fail("expected [dims] (one {...} per tensor dim), replicated or unreduced after the mesh")
	}
	sp.named, sp.namedPt = s, pt
	return p.expect('}')
}

// maximalMesh reads "maximal_mesh[device_id=N]" and what may follow it.
func (p *textParser) maximalMesh(sp *hloSpec) error {
	p.pos += len("maximal_mesh[")
	if w := p.word(); w != "device_id" {
		return p.fail("expected device_id=N")
	}
	if err := p.expect('='); err != nil {
		return err
	}
	p.skip()
	sp.deviceOff = p.pos
	var err error
	if sp.device, err = p.number(); err != nil {
		return err
	}
	if err := p.expect(']'); err != nil {
		return err
	}
	sp.kind = hloMaximal
	return p.namedTail(sp)
}

// namedMesh reads "mesh[a=2,b=4]" and checks that it is the request's mesh, axes in order.
func (p *textParser) namedMesh() error {
	meshOff := p.pos
	p.pos += len("mesh[")
	var axes []Axis
	for p.peek() != ']' {
		p.skip()
		name := p.ident()
		if name == "" {
			return p.fail("expected an axis name=size")
		}
		if err := p.expect('='); err != nil {
			return err
		}
		n, err := p.number()
		if err != nil {
			return err
		}
		axes = append(axes, Axis{Name: name, Size: n})
		if p.peek() == ',' {
			p.pos++
		} else if p.peek() != ']' {
			return p.fail("expected ',' or ']'")
		}
	}
	p.pos++
	same := len(axes) == len(p.m.Axes)
	for i := 0; same && i < len(axes); i++ {
		same = axes[i] == p.m.Axes[i]
	}
	if !same {
		got := make([]string, len(axes))
		for i, a := range axes {
			got[i] = a.Name + "=" + strconv.Itoa(a.Size)
		}
		return p.failAt(meshOff, "the sharding's mesh is %s but the request's mesh is %s; send the same mesh (axes in the same order)", strings.Join(got, ","), p.m.String())
	}
	return nil
}

// namedEntry reads one entry after the mesh of a named sharding (device_ids, the dims,
// replicated, unreduced, manual or metadata) into sp, s and pt. It reports whether the
// entry was the dims.
func (p *textParser) namedEntry(sp *hloSpec, s *Sharding, pt *textPather) (bool, error) {
	off := p.pos
	switch w := p.word(); w {
	case "device_ids":
		return false, p.deviceIDsList(off)
	case "replicated", "unreduced", "manual":
		return false, p.namedWhole(w, off, sp, s, pt)
	case "metadata":
		if err := p.expect('='); err != nil {
			return false, err
		}
		return false, p.skipBalanced()
	case "":
		if p.peek() != '[' {
			return false, p.fail("expected [dims], replicated, unreduced, device_ids=(...) or metadata={...}")
		}
		return true, p.namedDims(s, pt)
	default:
		return false, p.failAt(off, "unexpected %q in a named HLO sharding", w)
	}
}

// namedWhole reads "replicated", "unreduced" or "manual" (word w at off): alone it says
// what the whole tensor is; with "={...}" it lists the axes that are replicated or
// unreduced (manual axes are not modelled).
func (p *textParser) namedWhole(w string, off int, sp *hloSpec, s *Sharding, pt *textPather) error {
	if p.peek() != '=' {
		// The whole tensor: replicated, partial sums, or manual.
		switch w {
		case "replicated":
			sp.kind = hloReplicated
		case "unreduced":
			sp.kind = hloUnreduced
		default:
			sp.kind = hloManual
		}
		sp.start = off
		return nil
	}
	p.pos++
	if err := p.expect('{'); err != nil {
		return err
	}
	refs, offs, err := p.bareAxisList('}')
	if err != nil {
		return err
	}
	switch w {
	case "replicated":
		s.Replicated, pt.rep = append(s.Replicated, refs...), append(pt.rep, offs...)
	case "unreduced":
		s.Unreduced, pt.unr = append(s.Unreduced, refs...), append(pt.unr, offs...)
	default:
		if len(refs) > 0 {
			return p.failAt(off, "manual axes (a shard_map over some axes) are not modelled; give the sharding outside the shard_map")
		}
	}
	return nil
}

// namedDims reads "[{a}, {b:(1)2, ?}]", one {...} per tensor dim ('?' marks a dim open).
func (p *textParser) namedDims(s *Sharding, pt *textPather) error {
	p.pos++
	for p.peek() != ']' {
		p.skip()
		pt.dims = append(pt.dims, p.pos)
		if err := p.expect('{'); err != nil {
			return err
		}
		ds := DimSharding{Priority: NoPriority}
		refs, offs, err := p.bareAxisList('}')
		if err != nil {
			return err
		}
		ds.Axes = refs
		if len(refs) > 0 && refs[len(refs)-1] == (AxisRef{}) {
			ds.Axes, offs, ds.Open = refs[:len(refs)-1], offs[:len(offs)-1], true
		}
		s.Dims, pt.refs = append(s.Dims, ds), append(pt.refs, offs)
		if p.peek() == ',' {
			p.pos++
		} else if p.peek() != ']' {
			return p.fail("expected ',' or ']'")
		}
	}
	p.pos++
	return nil
}

// namedTail reads what may follow the mesh of a named sharding that needs nothing else.
func (p *textParser) namedTail(sp *hloSpec) error {
	for p.peek() == ',' {
		p.pos++
		if w := p.word(); w != "metadata" {
			return p.fail("expected metadata={...}")
		}
		if err := p.expect('='); err != nil {
			return err
		}
		if err := p.skipBalanced(); err != nil {
			return err
		}
	}
	return p.expect('}')
}

// ident reads an axis name ([A-Za-z_][A-Za-z0-9_]*).
func (p *textParser) ident() string {
	start := p.pos
	for p.pos < len(p.s) && isIdent(p.s[p.pos]) {
		p.pos++
	}
	return p.s[start:p.pos]
}

// bareAxisList reads "a, b:(1)2, ?" up to close; a trailing '?' is returned as a zero
// AxisRef.
func (p *textParser) bareAxisList(close byte) ([]AxisRef, []int, error) {
	var refs []AxisRef
	var offs []int
	for p.peek() != close {
		p.skip()
		off := p.pos
		if p.pos >= len(p.s) {
			return nil, nil, p.fail("expected an axis name or '%c', found the end", close)
		}
		if p.s[p.pos] == '?' {
			p.pos++
			refs, offs = append(refs, AxisRef{}), append(offs, off)
			if err := p.expect(close); err != nil {
				return nil, nil, err
			}
			return refs, offs, nil
		}
		name := p.ident()
		if strings.HasPrefix(p.s[p.pos:], ":(") {
			end := strings.IndexByte(p.s[p.pos:], ')')
			q := p.pos + end + 1
			for q < len(p.s) && p.s[q] >= '0' && p.s[q] <= '9' {
				q++
			}
			if end < 0 {
				return nil, nil, p.fail("unterminated sub-axis")
			}
			name += p.s[p.pos:q]
			p.pos = q
		}
		if name == "" {
			return nil, nil, p.fail("expected an axis name")
		}
		r, err := ParseAxisRef(name, p.m, p.field)
		if err != nil {
			return nil, nil, p.failAt(off, "%s", err.(*FieldError).Message)
		}
		refs, offs = append(refs, r), append(offs, off)
		if p.peek() == ',' {
			p.pos++
		} else if p.peek() != close {
			return nil, nil, p.fail("expected ',' or '%c'", close)
		}
	}
	p.pos++
	return refs, offs, nil
}

// deviceIDsList reads "=(...)" and checks the ids, in order, against the mesh's.
func (p *textParser) deviceIDsList(off int) error {
	if err := p.expect('='); err != nil {
		return err
	}
	if err := p.expect('('); err != nil {
		return err
	}
	var ids []int
	depth := 1
	for depth > 0 {
		if p.pos >= len(p.s) {
			return p.fail("unterminated device_ids=(...)")
		}
		switch c := p.s[p.pos]; {
		case c == '(' || c == '[':
			depth++
			p.pos++
		case c == ')' || c == ']':
			depth--
			p.pos++
		case c >= '0' && c <= '9':
			n, err := p.number()
			if err != nil {
				return err
			}
			if len(ids) == p.m.NumDevices() {
				return p.failAt(off, "device_ids lists more ids than the mesh's %d devices", p.m.NumDevices())
			}
			ids = append(ids, n)
		default:
			p.pos++
		}
	}
	for pos, id := range ids {
		if len(ids) != p.m.NumDevices() || p.m.DeviceAt(pos) != id {
			return p.failAt(off, "the sharding's mesh lists device ids %v, which are not the request mesh's device_ids; send the same mesh", truncateIDs(ids))
		}
	}
	return nil
}

func truncateIDs(ids []int) []int {
	if len(ids) > 16 {
		return ids[:16]
	}
	return ids
}
