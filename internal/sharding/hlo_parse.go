package sharding

import (
	"strings"
)

// This file parses HloSharding text into an hloSpec (hlo.go describes the format).

type hloKind int

const (
	hloTiled hloKind = iota
	hloReplicated
	hloMaximal
	hloManual
	hloUnknown
	hloUnreduced
	hloNamed // XLA's named (V3) form, already read into hloSpec.named
)

// hloSpec is one parsed HloSharding, with the offsets errors point at.
type hloSpec struct {
	kind      hloKind
	start     int // offset of '{'
	device    int // maximal
	deviceOff int
	tile      []int
	tileOffs  []int
	ids       []int // explicit device list
	idOffs    []int
	iota      []int // iota reshape dims (nil: explicit list)
	perm      []int
	iotaOff   int
	lastRep   bool
	subgroups []string // last_tile_dims
	subOffs   []int
	named     Sharding // hloNamed
	namedPt   *textPather
}

// ParseHLO parses XLA's HloSharding text ({replicated}, {unreduced}, {maximal device=N},
// {devices=[a,b,...]ids...} with an explicit or iota tile assignment,
// last_tile_dim_replicate, last_tile_dims={unreduced, replicated} (an unreduced
// subgroup's axes become the unreduced axes), and XLA's named form
// {mesh[a=2,b=4], [{a}, {b}]} on the request's mesh; metadata, shard_as and shard_like
// are ignored) and expresses it on mesh m for a tensor of the given shape
// (nil: the rank is read from the tile assignment). It finds, for each tensor dim, the
// mesh axes and sub-axes whose device order reproduces the tile assignment exactly, and
// returns the sharding in canonical form with the replicated axes implicit. Errors are
// *FieldError naming field and the byte offset of what m cannot express: a device order
// no (sub-)axes reproduce, a tile count that splits no axis, a device count other than
// m's, {maximal} on a mesh of more than one device, and manual shardings (shard_map),
// which are not modelled.
func ParseHLO(text string, m *Mesh, shape []int64, field string) (Sharding, error) {
	p := &textParser{s: text, field: field, m: m}
	if p.peek() != '{' {
		return Sharding{}, p.fail("expected '{' to start an HLO sharding such as {devices=[2,1]<=[2]}")
	}
	start := p.pos
	p.pos++
	if p.peek() == '{' {
		p.pos = start
		return Sharding{}, p.fail("a tuple sharding {{...}, ...} shards several values; give the sharding of one tensor")
	}
	p.pos = start
	return p.hloAt(m, shape)
}

// hloAt parses the one HLO sharding at p.pos, which must end the text.
func (p *textParser) hloAt(m *Mesh, shape []int64) (Sharding, error) {
	sp, err := p.hloSharding(m.NumDevices())
	if err != nil {
		return Sharding{}, err
	}
	if !p.atEnd() {
		return Sharding{}, p.fail("unexpected %q after the sharding", p.s[p.pos:min(len(p.s), p.pos+10)])
	}
	return sp.express(p, m, shape)
}

// ParseHLOTuple parses the HloSharding of an op with len(shapes) results: a tuple
// {{...}, {...}} with one element per result, or one sharding that applies to every
// result. Errors are as ParseHLO's.
func ParseHLOTuple(text string, m *Mesh, shapes [][]int64, field string) ([]Sharding, error) {
	p := &textParser{s: text, field: field, m: m}
	if p.peek() != '{' {
		return nil, p.fail("expected '{' to start an HLO sharding such as {devices=[2,1]<=[2]}")
	}
	start := p.pos
	p.pos++
	var specs []*hloSpec
	if p.peek() == '{' {
		for {
			sp, err := p.hloSharding(m.NumDevices())
			if err != nil {
				return nil, err
			}
			specs = append(specs, sp)
			if p.peek() == ',' {
				p.pos++
				p.skipIndexComment()
				continue
			}
			if err := p.expect('}'); err != nil {
				return nil, err
			}
			break
		}
		if len(specs) != len(shapes) {
			p.pos = start
			return nil, p.fail("the tuple sharding has %d elements but the op has %d results; give one per result", len(specs), len(shapes))
		}
	} else {
		p.pos = start
		sp, err := p.hloSharding(m.NumDevices())
		if err != nil {
			return nil, err
		}
		for range shapes {
			specs = append(specs, sp)
		}
	}
	if !p.atEnd() {
		return nil, p.fail("unexpected %q after the sharding", p.s[p.pos:min(len(p.s), p.pos+10)])
	}
	out := make([]Sharding, len(specs))
	for i, sp := range specs {
		s, err := sp.express(p, m, shapes[i])
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// skipIndexComment skips the "/*index=5*/" XLA prints before every fifth tuple element.
func (p *textParser) skipIndexComment() {
	p.skip()
	if strings.HasPrefix(p.s[p.pos:], "/*") {
		if end := strings.Index(p.s[p.pos+2:], "*/"); end >= 0 {
			p.pos += 2 + end + 2
		}
	}
}

// word reads an attribute name ([a-z_]+).
func (p *textParser) word() string {
	p.skip()
	start := p.pos
	for p.pos < len(p.s) && (p.s[p.pos] == '_' || (p.s[p.pos] >= 'a' && p.s[p.pos] <= 'z')) {
		p.pos++
	}
	return p.s[start:p.pos]
}

// intList reads "[a,b,...]" of numbers, each >= 1 and their product <= limit.
func (p *textParser) intList(limit int, what string) (vals, offs []int, err error) {
	if err := p.expect('['); err != nil {
		return nil, nil, err
	}
	prod := 1
	for {
		p.skip()
		off := p.pos
		n, err := p.number()
		if err != nil {
			return nil, nil, err
		}
		if n < 1 {
			p.pos = off
			return nil, nil, p.fail("%s %d must be >= 1", what, n)
		}
		if n > limit/prod {
			p.pos = off
			return nil, nil, p.fail("the %ss multiply to more than the mesh's %d devices", what, limit)
		}
		prod *= n
		vals, offs = append(vals, n), append(offs, off)
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if err := p.expect(']'); err != nil {
			return nil, nil, err
		}
		return vals, offs, nil
	}
}

// hloSharding parses one non-tuple "{...}"; devices bounds every device count.
func (p *textParser) hloSharding(devices int) (*hloSpec, error) {
	p.skip()
	sp := &hloSpec{start: p.pos, kind: -1}
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	if p.skip(); strings.HasPrefix(p.s[p.pos:], "mesh[") || strings.HasPrefix(p.s[p.pos:], "maximal_mesh[") {
		return sp, p.namedSharding(sp)
	}
	setKind := func(k hloKind, off int) error {
		if sp.kind != -1 {
			p.pos = off
			return p.fail("a sharding has one kind (replicated, unreduced, maximal, manual, unknown or devices=...); this is a second")
		}
		sp.kind = k
		return nil
	}
	for p.peek() != '}' {
		p.skip()
		off := p.pos
		w := p.word()
		var err error
		switch w {
		case "replicated":
			err = setKind(hloReplicated, off)
		case "manual":
			err = setKind(hloManual, off)
		case "unknown":
			err = setKind(hloUnknown, off)
		case "unreduced":
			err = setKind(hloUnreduced, off)
		case "maximal":
			err = setKind(hloMaximal, off)
		case "device":
			if err = p.expect('='); err == nil {
				p.skip()
				sp.deviceOff = p.pos
				sp.device, err = p.number()
			}
		case "devices":
			if err = setKind(hloTiled, off); err == nil {
				err = p.tileAssignment(sp, devices)
			}
		case "last_tile_dim_replicate":
			sp.lastRep = true
		case "last_tile_dims":
			err = p.subgroupTypes(sp)
		case "metadata", "frontend_attributes":
			if err = p.expect('='); err == nil {
				err = p.skipBalanced()
			}
		case "shard_as", "shard_like":
			_, err = p.number()
		case "":
			if p.pos >= len(p.s) {
				return nil, p.fail("expected '}', found the end")
			}
			return nil, p.fail("unexpected '%c' in an HLO sharding", p.s[p.pos])
		default:
			p.pos = off
			return nil, p.fail("unknown HLO sharding attribute %q; expected replicated, maximal device=N, devices=[...], last_tile_dim_replicate, last_tile_dims={...} or metadata={...}", w)
		}
		if err != nil {
			return nil, err
		}
		if p.peek() == ',' { // tolerated between attributes
			p.pos++
		}
	}
	p.pos++
	switch {
	case sp.kind == -1:
		p.pos = sp.start
		return nil, p.fail("empty HLO sharding; write {replicated} or {devices=[...]...}")
	case sp.kind == hloMaximal && sp.deviceOff == 0:
		p.pos = sp.start
		return nil, p.fail("{maximal} needs device=N")
	}
	return sp, nil
}

// tileAssignment parses "=[t0,t1,...]" then an explicit id list or "<=[dims]T(perm)".
func (p *textParser) tileAssignment(sp *hloSpec, devices int) error {
	if err := p.expect('='); err != nil {
		return err
	}
	var err error
	if sp.tile, sp.tileOffs, err = p.intList(devices, "tile count"); err != nil {
		return err
	}
	n := 1
	for _, t := range sp.tile {
		n *= t
	}
	p.skip()
	if strings.HasPrefix(p.s[p.pos:], "<=") {
		return p.iotaAssignment(sp, devices, n)
	}
	return p.explicitAssignment(sp, n)
}

// iotaAssignment parses "<=[dims]T(perm)" (the T(...) optional) for n tiles.
func (p *textParser) iotaAssignment(sp *hloSpec, devices, n int) error {
	sp.iotaOff = p.pos
	p.pos += 2
	var err error
	if sp.iota, _, err = p.intList(devices, "iota dim"); err != nil {
		return err
	}
	if p.peek() == 'T' {
		if err := p.iotaPerm(sp); err != nil {
			return err
		}
	}
	m := 1
	for _, d := range sp.iota {
		m *= d
	}
	if m != n {
		p.pos = sp.iotaOff
		return p.fail("the iota <=[...] has %d devices but the tile counts multiply to %d", m, n)
	}
	return nil
}

// iotaPerm parses "T(perm)", a permutation of the iota's dims.
func (p *textParser) iotaPerm(sp *hloSpec) error {
	p.pos++
	if err := p.expect('('); err != nil {
		return err
	}
	seen := make([]bool, len(sp.iota))
	for {
		p.skip()
		off := p.pos
		k, err := p.number()
		if err != nil {
			return err
		}
		if k >= len(sp.iota) || seen[k] {
			p.pos = off
			return p.fail("T(...) must be a permutation of 0..%d (one per iota dim)", len(sp.iota)-1)
		}
		seen[k] = true
		sp.perm = append(sp.perm, k)
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if err := p.expect(')'); err != nil {
			return err
		}
		break
	}
	if len(sp.perm) != len(sp.iota) {
		return p.fail("T(...) has %d entries but the iota has %d dims", len(sp.perm), len(sp.iota))
	}
	return nil
}

// explicitAssignment parses an explicit list of one device id per tile, n tiles.
func (p *textParser) explicitAssignment(sp *hloSpec, n int) error {
	for {
		p.skip()
		off := p.pos
		id, err := p.number()
		if err != nil {
			return err
		}
		if len(sp.ids) == n {
			p.pos = off
			return p.fail("more device ids than the %d tiles", n)
		}
		sp.ids, sp.idOffs = append(sp.ids, id), append(sp.idOffs, off)
		// A comma followed by a number continues the list; anything else ends it.
		if p.peek() != ',' {
			break
		}
		q := p.pos + 1
		for q < len(p.s) && p.s[q] == ' ' {
			q++
		}
		if q >= len(p.s) || p.s[q] < '0' || p.s[q] > '9' {
			break
		}
		p.pos++
	}
	if len(sp.ids) != n {
		return p.fail("%d device ids for %d tiles; list one id per tile", len(sp.ids), n)
	}
	return nil
}

// subgroupTypes parses "={replicated, manual, ...}".
func (p *textParser) subgroupTypes(sp *hloSpec) error {
	if err := p.expect('='); err != nil {
		return err
	}
	if err := p.expect('{'); err != nil {
		return err
	}
	for {
		p.skip()
		off := p.pos
		w := p.word()
		if w == "" {
			return p.fail("expected a subgroup type (replicated or manual)")
		}
		sp.subgroups, sp.subOffs = append(sp.subgroups, w), append(sp.subOffs, off)
		if p.peek() == ',' {
			p.pos++
			continue
		}
		return p.expect('}')
	}
}

// skipBalanced skips a {...} value (metadata), minding quoted strings.
func (p *textParser) skipBalanced() error {
	if err := p.expect('{'); err != nil {
		return err
	}
	depth := 1
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch c {
		case '"':
			for p.pos < len(p.s) && p.s[p.pos] != '"' {
				if p.s[p.pos] == '\\' {
					p.pos++
				}
				p.pos++
			}
			p.pos++
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return nil
			}
		}
	}
	return p.fail("unterminated {...}")
}

// failAt reports format at offset off.
func (p *textParser) failAt(off int, format string, args ...any) error {
	p.pos = off
	return p.fail(format, args...)
}
