package sharding

import (
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// This file reads and prints XLA's HloSharding text ("{devices=[2,1,4]<=[8]
// last_tile_dim_replicate}"), the form XLA dumps, jax.Array.sharding and mhlo.sharding
// attributes print.
//
// An HloSharding is a tile assignment: an array of device ids of shape [t0, ..., t(r-1),
// R...] (one tile count per tensor dim, then replication dims); the device at index
// (i0, ..., i(r-1), j) holds tile (i0, ..., i(r-1)). A mesh sharding describes the same
// thing once the mesh is cut into pieces (sub-axes): the tile assignment is the mesh's
// devices reshaped into those pieces and transposed so that each tensor dim's pieces come
// first (major to minor) and the replicated pieces last. Reading an HloSharding is finding
// those pieces; printing one is writing down that reshape and transpose.

// hloPiece is a sub-axis of mesh axis `axis`: the digit (coord / minor) % size.
type hloPiece struct {
	axis, minor, size int
}

func (p hloPiece) ref(m *Mesh) AxisRef {
	n := m.Axes[p.axis].Size
	return AxisRef{Name: m.Axes[p.axis].Name, Pre: n / (p.minor * p.size), Size: p.size, Of: n}
}

// axisStrides returns the row-major position stride of every mesh axis.
func axisStrides(m *Mesh) []int {
	st := make([]int, len(m.Axes))
	s := 1
	for i := len(m.Axes) - 1; i >= 0; i-- {
		st[i] = s
		s *= m.Axes[i].Size
	}
	return st
}

// HLO prints s as XLA's HloSharding text on m: the tile count of every dim, then the
// unreduced and the replicated device counts as subgroup dims when there are any
// (last_tile_dims={unreduced, replicated}, or last_tile_dim_replicate alone as XLA
// canonicalizes it), and the device order, as an iota tile assignment
// ("<=[2,8,4,4]T(0,2,1,3)") on a mesh without device_ids, else as an explicit id list.
// Implicitly or explicitly replicated axes are replication; open flags and priorities
// are not part of the layout and are not printed. s must be valid on m.
func (s Sharding) HLO(m *Mesh) string {
	// Cut every axis at each sub-axis boundary a dim or the unreduced set uses.
	cuts := make([][]int, len(m.Axes)) // per axis, ascending pre values, 1 and size included
	for i, a := range m.Axes {
		cuts[i] = []int{1, a.Size}
	}
	for _, r := range append(s.UsedAxes()[:0:0], s.Unreduced...) {
		i := m.AxisIndex(r.Name)
		cuts[i] = append(cuts[i], r.Pre, r.Next())
	}
	for _, d := range s.Dims {
		for _, r := range d.Axes {
			i := m.AxisIndex(r.Name)
			cuts[i] = append(cuts[i], r.Pre, r.Next())
		}
	}
	var pieces []hloPiece // mesh order, major to minor
	first := make([]int, len(m.Axes))
	for i, a := range m.Axes {
		slices.Sort(cuts[i])
		cuts[i] = slices.Compact(cuts[i])
		first[i] = len(pieces)
		for k := 0; k+1 < len(cuts[i]); k++ {
			pre, next := cuts[i][k], cuts[i][k+1]
			pieces = append(pieces, hloPiece{axis: i, minor: a.Size / next, size: next / pre})
		}
	}
	used := make([]bool, len(pieces))
	var order []int
	take := func(r AxisRef) {
		i := m.AxisIndex(r.Name)
		for k := range len(cuts[i]) - 1 {
			if pre := cuts[i][k]; pre >= r.Pre && pre < r.Next() {
				order = append(order, first[i]+k)
				used[first[i]+k] = true
			}
		}
	}
	counts := make([]int, len(s.Dims))
	sharded := false
	for d, ds := range s.Dims {
		counts[d] = 1
		for _, r := range ds.Axes {
			take(r)
			counts[d] *= r.Size
		}
		sharded = sharded || counts[d] > 1
	}
	unreduced := 1
	for _, r := range s.Unreduced {
		take(r)
		unreduced *= r.Size
	}
	rep := 1
	for g, pc := range pieces {
		if !used[g] && pc.size > 1 {
			order = append(order, g)
			rep *= pc.size
		}
	}
	switch {
	case !sharded && unreduced == 1:
		return "{replicated}"
	case !sharded && rep == 1:
		return "{unreduced}"
	}
	if unreduced > 1 {
		counts = append(counts, unreduced)
	}
	if rep > 1 {
		counts = append(counts, rep)
	}
	var b strings.Builder
	b.WriteString("{devices=[")
	for d, c := range counts {
		if d > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
	}
	b.WriteByte(']')
	if m.DeviceIDs == nil {
		writeIota(&b, pieces, order)
	} else {
		writeDeviceList(&b, m, pieces, order)
	}
	switch {
	case unreduced > 1 && rep > 1:
		b.WriteString(" last_tile_dims={unreduced, replicated}")
	case unreduced > 1:
		b.WriteString(" last_tile_dims={unreduced}")
	case rep > 1:
		b.WriteString(" last_tile_dim_replicate")
	}
	b.WriteByte('}')
	return b.String()
}

// writeIota prints order (indices into pieces) as XLA's canonical iota tile assignment:
// the mesh reshaped into runs of pieces that stay adjacent in order, then transposed.
func writeIota(b *strings.Builder, pieces []hloPiece, order []int) {
	type run struct{ first, size int }
	var runs []run // in order's sequence
	for k, g := range order {
		if pieces[g].size == 1 {
			continue
		}
		if n := len(runs); n > 0 && k > 0 && order[k-1]+1 == g {
			runs[n-1].size *= pieces[g].size
			continue
		}
		runs = append(runs, run{g, pieces[g].size})
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(x, y run) int { return x.first - y.first })
	n := 1
	for _, r := range runs {
		n *= r.size
	}
	perm := make([]string, len(runs))
	identity := true
	for k, r := range runs {
		idx := slices.IndexFunc(sorted, func(x run) bool { return x.first == r.first })
		perm[k] = strconv.Itoa(idx)
		identity = identity && idx == k
	}
	if identity {
		b.WriteString("<=[" + strconv.Itoa(n) + "]")
		return
	}
	dims := make([]string, len(sorted))
	for k, r := range sorted {
		dims[k] = strconv.Itoa(r.size)
	}
	b.WriteString("<=[" + strings.Join(dims, ",") + "]T(" + strings.Join(perm, ",") + ")")
}

// writeDeviceList lists device ids in tile order (row-major over order's pieces).
func writeDeviceList(b *strings.Builder, m *Mesh, pieces []hloPiece, order []int) {
	st := axisStrides(m)
	n := 1
	for _, g := range order {
		n *= pieces[g].size
	}
	digits := make([]int, len(order))
	for k := range n {
		p := 0
		for i, g := range order {
			pc := pieces[g]
			p += digits[i] * pc.minor * st[pc.axis]
		}
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(m.DeviceAt(p)))
		for i := len(digits) - 1; i >= 0; i-- {
			digits[i]++
			if digits[i] < pieces[order[i]].size {
				break
			}
			digits[i] = 0
		}
	}
}

// ---- parsing ----

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
	sp, err := p.hloSharding(m.NumDevices())
	if err != nil {
		return Sharding{}, err
	}
	if p.peek() != 0 {
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
	if p.peek() != 0 {
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
		sp.iotaOff = p.pos
		p.pos += 2
		if sp.iota, _, err = p.intList(devices, "iota dim"); err != nil {
			return err
		}
		if p.peek() == 'T' {
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

// express maps sp onto mesh m for a tensor of the given shape.
func (sp *hloSpec) express(p *textParser, m *Mesh, shape []int64) (Sharding, error) {
	n := m.NumDevices()
	switch sp.kind {
	case hloReplicated, hloMaximal, hloUnreduced:
		if sp.kind == hloMaximal {
			if sp.device >= n {
				return Sharding{}, p.failAt(sp.deviceOff, "device %d is not on the mesh (ids 0..%d)", sp.device, n-1)
			}
			if n > 1 {
				return Sharding{}, p.failAt(sp.start, "{maximal device=%d} keeps the whole tensor on one device, but a mesh sharding places data on all %d devices of the mesh; use {replicated}, a tiled sharding, or a 1-device mesh", sp.device, n)
			}
		}
		if shape == nil {
			return Sharding{}, p.failAt(sp.start, "the tensor's rank is unknown here; give its shape, or write the sharding as {devices=[...]...}")
		}
		s := Replicated(len(shape))
		if sp.kind == hloUnreduced { // every device holds a partial sum of the whole tensor
			for _, a := range m.Axes {
				if a.Size > 1 {
					s.Unreduced = append(s.Unreduced, FullAxis(a))
				}
			}
		}
		return s, nil
	case hloNamed:
		return finish(sp.named.Clone(), m, shape, sp.namedPt)
	case hloManual:
		return Sharding{}, p.failAt(sp.start, "{manual} (a shard_map body's sharding) is not modelled: shardplan plans data placement across the mesh; give the sharding outside the shard_map")
	case hloUnknown:
		return Sharding{}, p.failAt(sp.start, "{unknown} says nothing about placement; give a concrete sharding")
	}
	// types lists the subgroup dims after the data dims: replicated or unreduced.
	var types []string
	if sp.lastRep {
		types = []string{"replicated"}
	}
	if len(sp.subgroups) > 0 {
		if sp.lastRep {
			return Sharding{}, p.failAt(sp.subOffs[0], "use either last_tile_dim_replicate or last_tile_dims={...}, not both")
		}
		for k, g := range sp.subgroups {
			switch g {
			case "replicated", "unreduced":
			case "manual":
				return Sharding{}, p.failAt(sp.subOffs[k], "manual subgroups (shard_map over some axes) are not modelled; give the sharding outside the shard_map")
			default:
				return Sharding{}, p.failAt(sp.subOffs[k], "unknown subgroup type %q; expected replicated, unreduced or manual", g)
			}
		}
		types = sp.subgroups
	}
	subgroups := len(types)
	rank := len(sp.tile) - subgroups
	if rank < 0 {
		return Sharding{}, p.failAt(sp.tileOffs[0], "devices=[...] has %d dims but %d replication dims are declared", len(sp.tile), subgroups)
	}
	if shape != nil && rank != len(shape) {
		return Sharding{}, p.failAt(sp.tileOffs[0], "devices=[...] gives %d tensor dims (plus %d replication dims) but the tensor has rank %d; give one tile count per tensor dim", rank, subgroups, len(shape))
	}
	total := 1
	for _, t := range sp.tile {
		total *= t
	}
	if total != n {
		return Sharding{}, p.failAt(sp.tileOffs[0], "the tile assignment has %d devices but the mesh has %d; the sharding must use every device of the mesh", total, n)
	}
	// An iota on a mesh without device_ids maps onto the mesh symbolically, in time linear
	// in its dims; otherwise every device is checked (an explicit list pays for that with
	// its own length; iotas on a mesh with device_ids draw on a budget per mesh).
	symbolic := sp.iota != nil && m.DeviceIDs == nil
	if sp.iota != nil && !symbolic && !m.spendHLOWork(n) {
		return Sharding{}, p.failAt(sp.iotaOff, "the HLO iota shardings of this request need more than %d device-by-device checks on a mesh with device_ids; write them as explicit device lists, Shardy text or PartitionSpecs", hloWorkLimit)
	}
	var ids []int
	if !symbolic {
		var err error
		if ids, err = sp.deviceIDs(p, n); err != nil {
			return Sharding{}, err
		}
	}
	// offAt is the offset to blame for tile-assignment entry k.
	offAt := func(k int) int {
		if sp.iota != nil {
			return sp.iotaOff
		}
		return sp.idOffs[k]
	}
	if rank > len(sp.tile) {
		rank = len(sp.tile)
	}
	// rep is the number of devices per data tile; sortRep the size of the trailing
	// replicated subgroups, whose devices may come in any order.
	rep := n / max(1, productInts(sp.tile[:rank]))
	sortRep := 1
	for k := len(types) - 1; k >= 0 && types[k] == "replicated"; k-- {
		sortRep *= sp.tile[rank+k]
	}
	var pieces []hloPiece
	if symbolic {
		var ok bool
		if pieces, ok = iotaPieces(m, sp.iota, sp.perm); !ok {
			return Sharding{}, p.failAt(sp.iotaOff, "the iota's reshape dims do not split mesh %s at (sub-)axis boundaries; no mesh axes or sub-axes reproduce this device order", m.String())
		}
	} else {
		pos := make([]int, n)
		for k, id := range ids {
			pos[k] = m.PositionOf(id)
		}
		// Replicas of a tile may come in any order: sort each group.
		sorted := slices.Clone(pos)
		for g := 0; g < n; g += sortRep {
			slices.Sort(sorted[g : g+sortRep])
		}
		var bad int
		var why string
		if pieces, bad, why = findPieces(m, sorted); bad >= 0 {
			return Sharding{}, p.failAt(offAt(bad), "%s; no mesh axes or sub-axes reproduce this device order on mesh %s%s", why, m.String(), deviceIDsNote(m))
		}
	}
	// Hand the pieces, major to minor, to the data dims, then to the subgroups (an
	// unreduced subgroup's pieces are the unreduced axes; replicated ones are dropped).
	s := Replicated(rank)
	for t, count := range sp.tile {
		var dst *[]AxisRef
		switch {
		case t < rank:
			dst = &s.Dims[t].Axes
		case types[t-rank] == "unreduced":
			dst = &s.Unreduced
		}
		for need := count; need > 1; {
			pc := pieces[0]
			switch {
			case pc.size <= need && need%pc.size == 0:
				need /= pc.size
				pieces = pieces[1:]
			case pc.size > need && pc.size%need == 0:
				pieces[0].size /= need
				pc = hloPiece{axis: pc.axis, minor: pc.minor * pieces[0].size, size: need}
				need = 1
			default:
				return Sharding{}, p.failAt(sp.tileOffs[t], "tile count %d of tile dim %d does not fit the mesh: its devices follow %s, and %d and %d have no common split", count, t, pc.ref(m), pc.size, need)
			}
			if dst != nil {
				*dst = append(*dst, pc.ref(m))
			}
		}
	}
	pt := &hloPather{field: p.field, off: sp.start}
	if err := validate(&s, shape, pt); err != nil {
		return Sharding{}, err
	}
	s.Canonicalize(m)
	// Verify by tiles: every device holds the tile the HLO assigns it (the symbolic
	// reading is exact by construction).
	if !symbolic {
		if k := tileMismatch(m, s, sp.tile[:rank], ids, rep); k >= 0 {
			return Sharding{}, p.failAt(offAt(k), "device %d would hold a different tile under %s; no mesh axes reproduce this tile assignment", ids[k], s.Body())
		}
	}
	return s, nil
}

func productInts(v []int) int {
	p := 1
	for _, x := range v {
		p *= x
	}
	return p
}

func deviceIDsNote(m *Mesh) string {
	if m.DeviceIDs == nil {
		return ""
	}
	return " (with its device_ids)"
}

// deviceIDs returns the tile assignment's ids in row-major tile order, checked to be a
// permutation of 0..n-1.
func (sp *hloSpec) deviceIDs(p *textParser, n int) ([]int, error) {
	if sp.iota == nil {
		seen := make([]int, n)
		for k, id := range sp.ids {
			if id >= n {
				return nil, p.failAt(sp.idOffs[k], "device %d is not on the mesh (ids 0..%d)", id, n-1)
			}
			if seen[id] > 0 {
				return nil, p.failAt(sp.idOffs[k], "device %d appears twice in the tile assignment (also entry %d)", id, seen[id]-1)
			}
			seen[id] = k + 1
		}
		return sp.ids, nil
	}
	dims, perm := sp.iota, sp.perm
	if perm == nil {
		perm = make([]int, len(dims))
		for i := range perm {
			perm[i] = i
		}
	}
	stride := make([]int, len(dims))
	s := 1
	for i := len(dims) - 1; i >= 0; i-- {
		stride[i] = s
		s *= dims[i]
	}
	out := make([]int, 0, n)
	digits := make([]int, len(perm))
	for range n {
		v := 0
		for i, j := range perm {
			v += digits[i] * stride[j]
		}
		out = append(out, v)
		for i := len(digits) - 1; i >= 0; i-- {
			digits[i]++
			if digits[i] < dims[perm[i]] {
				break
			}
			digits[i] = 0
		}
	}
	return out, nil
}

// hloWorkLimit bounds the device-by-device checks ParseHLO spends on iota tile
// assignments on one mesh with device_ids (about a second of CPU): a request of many
// such shardings on a big mesh would otherwise cost tensors x devices.
var hloWorkLimit int64 = 1 << 26

// spendHLOWork takes n checks from m's budget; false when it is spent.
func (m *Mesh) spendHLOWork(n int) bool {
	if m.hloWork == nil {
		return int64(n) <= hloWorkLimit // a mesh not built through Validate: no shared budget
	}
	return atomic.AddInt64(m.hloWork, int64(n)) <= hloWorkLimit
}

// iotaPieces reads an iota tile assignment (reshape dims, transposed by perm; nil perm:
// identity) on a mesh without device_ids, where ids are positions: each reshape dim is a
// run of position strides, cut where mesh axes start. It returns the pieces major to
// minor in tile order, or false when a reshape dim splits an axis at no sub-axis
// boundary.
func iotaPieces(m *Mesh, dims, perm []int) ([]hloPiece, bool) {
	if perm == nil {
		perm = make([]int, len(dims))
		for i := range perm {
			perm[i] = i
		}
	}
	// Merge reshape dims that stay adjacent after the transpose (XLA's canonical form):
	// only the remaining boundaries must fall on sub-axis boundaries.
	type run struct{ lo, hi int } // position strides [lo, hi)
	stride := make([]int, len(dims))
	s := 1
	for j := len(dims) - 1; j >= 0; j-- {
		stride[j] = s
		s *= dims[j]
	}
	var runs []run
	for k, j := range perm {
		r := run{stride[j], stride[j] * dims[j]}
		if n := len(runs); n > 0 && k > 0 && perm[k-1] == j-1 {
			runs[n-1].lo = r.lo
			continue
		}
		runs = append(runs, r)
	}
	ast := axisStrides(m)
	var out []hloPiece
	for _, r := range runs {
		for a, ax := range m.Axes {
			if ax.Size == 1 {
				continue
			}
			alo, ahi := ast[a], ast[a]*ax.Size
			l, h := max(r.lo, alo), min(r.hi, ahi)
			if l >= h {
				continue
			}
			if l%alo != 0 || h%alo != 0 {
				return nil, false
			}
			minor, upper := l/alo, h/alo
			if ax.Size%upper != 0 || upper%minor != 0 {
				return nil, false
			}
			out = append(out, hloPiece{axis: a, minor: minor, size: upper / minor})
		}
	}
	return out, true
}

// findPieces reads the mesh pieces, major to minor, whose row-major digits give the
// mesh position pos[k] of every tile-assignment entry k. It returns the first entry no
// such reading explains (or -1) and why.
func findPieces(m *Mesh, pos []int) (pieces []hloPiece, bad int, why string) {
	n := len(pos)
	if pos[0] != 0 {
		return nil, 0, "the first tile is held by device " + strconv.Itoa(m.DeviceAt(pos[0])) + ", not by the mesh's first device " + strconv.Itoa(m.DeviceAt(0))
	}
	st := axisStrides(m)
	coords := make([]int, len(m.Axes))
	var refs []AxisRef
	idx := 1
	for idx < n {
		v := pos[idx]
		m.Coords(v, coords)
		axis := -1
		for i, c := range coords {
			if c != 0 {
				if axis >= 0 {
					return nil, idx, "entry " + strconv.Itoa(idx) + " steps along two mesh axes at once"
				}
				axis = i
			}
		}
		size := m.Axes[axis].Size
		q := coords[axis]
		if size%q != 0 {
			return nil, idx, "entry " + strconv.Itoa(idx) + " steps " + strconv.Itoa(q) + " along axis " + m.Axes[axis].Name + ", which splits no sub-axis"
		}
		k := 2
		for k < size/q && idx*k < n && pos[idx*k] == k*v {
			k++
		}
		if (size/q)%k != 0 {
			return nil, idx, "entry " + strconv.Itoa(idx) + " starts a run of " + strconv.Itoa(k) + " along axis " + m.Axes[axis].Name + ", which is no sub-axis"
		}
		pc := hloPiece{axis: axis, minor: q, size: k}
		r := pc.ref(m)
		for _, o := range refs {
			if o.Overlaps(r) || !o.CanCoexist(r) {
				return nil, idx, "entry " + strconv.Itoa(idx) + " reuses part of axis " + m.Axes[axis].Name
			}
		}
		refs = append(refs, r)
		pieces = append(pieces, pc)
		idx *= k
	}
	if idx != n {
		return nil, n - 1, "the device order does not factor into mesh axes"
	}
	slices.Reverse(pieces)
	// Check every entry against the reading.
	digits := make([]int, len(pieces))
	for k := range n {
		want := 0
		for i, pc := range pieces {
			want += digits[i] * pc.minor * st[pc.axis]
		}
		if pos[k] != want {
			return nil, k, "entry " + strconv.Itoa(k) + " holds device " + strconv.Itoa(m.DeviceAt(pos[k])) + " where the axes read from the first entries put device " + strconv.Itoa(m.DeviceAt(want))
		}
		for i := len(digits) - 1; i >= 0; i-- {
			digits[i]++
			if digits[i] < pieces[i].size {
				break
			}
			digits[i] = 0
		}
	}
	return pieces, -1, ""
}

// tileMismatch returns the first tile-assignment entry whose device holds another tile
// under s, or -1.
func tileMismatch(m *Mesh, s Sharding, tile []int, ids []int, rep int) int {
	l := NewLayout(m, make([]int64, len(tile)), s)
	coords := make([]int, len(m.Axes))
	want := make([]int, len(tile))
	for k, id := range ids {
		t := k / rep
		for d := len(tile) - 1; d >= 0; d-- {
			want[d] = t % tile[d]
			t /= tile[d]
		}
		m.Coords(m.PositionOf(id), coords)
		for d := range tile {
			if l.ShardIndex(d, coords) != want[d] {
				return k
			}
		}
	}
	return -1
}

// hloPather blames every invariant violation on the sharding's '{'.
type hloPather struct {
	field string
	off   int
}

func (p *hloPather) whole() string { return p.field }
func (p *hloPather) dim(d int) (string, string) {
	return p.field, "at offset " + strconv.Itoa(p.off) + " (dim " + strconv.Itoa(d) + "): "
}
func (p *hloPather) ref(place) (string, string) {
	return p.field, "at offset " + strconv.Itoa(p.off) + ": "
}
