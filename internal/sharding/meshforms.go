package sharding

import (
	"strconv"
	"strings"
)

// Meshes as the frameworks print them, read by ParseMeshString beside "x=2,y=4":
//
//	Mesh('x': 2, 'y': 4)                           jax.sharding.Mesh (axis_types=... ignored)
//	AbstractMesh('x': 2, 'y': 4, axis_types=...)   jax.sharding.AbstractMesh
//	Mesh(device_ids=array([[0, 1], [2, 3]]), axis_names=('x', 'y'))   older jax
//	sdy.mesh @mesh = <["x"=2, "y"=4]>              Shardy (also #sdy.mesh<...>, <[...]>,
//	                                               with device_ids=[...])
//	DeviceMesh('cuda', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))   torch
//
// A printed device list becomes the mesh's device_ids (row-major); it must be a
// permutation of 0..N-1. Errors name the form that was recognized.

// MeshForm names the printed form text is in ("" for the name=size list).
func MeshForm(text string) string {
	t := strings.TrimSpace(text)
	for _, prefix := range []string{"jax.sharding.", "sharding.", "jax."} {
		t = strings.TrimPrefix(t, prefix)
	}
	switch {
	case strings.HasPrefix(t, "Mesh("):
		return "a JAX Mesh repr"
	case strings.HasPrefix(t, "AbstractMesh("):
		return "a JAX AbstractMesh repr"
	case strings.HasPrefix(t, "sdy.mesh"), strings.HasPrefix(t, "#sdy.mesh"), strings.HasPrefix(t, "<"):
		return "a Shardy sdy.mesh"
	case strings.HasPrefix(t, "DeviceMesh"):
		return "a torch DeviceMesh repr"
	}
	return ""
}

// parsePrintedMesh reads text in the printed form named form (MeshForm's answer).
func parsePrintedMesh(text, form, field string) (*Mesh, error) {
	p := &textParser{s: text, field: field}
	var m *Mesh
	var err error
	if form == "a Shardy sdy.mesh" {
		m, err = p.sdyMesh()
	} else {
		m, err = p.pyMesh(form)
	}
	if err != nil {
		return nil, withForm(err, form)
	}
	if len(m.Axes) == 0 {
		return nil, withForm(Fieldf(field, "the mesh has no axes; give at least one named axis"), form)
	}
	if err := m.Validate(""); err != nil {
		es, _ := AsFieldErrors(err)
		out := make(Errors, len(es))
		for i, e := range es {
			out[i] = Fieldf(field, "%s", e.Message)
		}
		return nil, withForm(out, form)
	}
	return m, nil
}

// withForm puts "read as FORM: " in front of every message of err (field errors).
func withForm(err error, form string) error {
	es, ok := AsFieldErrors(err)
	if !ok {
		return err
	}
	out := make(Errors, len(es))
	for i, e := range es {
		out[i] = &FieldError{Field: e.Field, Message: "read as " + form + ": " + e.Message}
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

// pyMesh reads the jax and torch reprs.
func (p *textParser) pyMesh(form string) (*Mesh, error) {
	p.skip()
	if strings.HasPrefix(p.s[p.pos:], "DeviceMesh:") { // torch's older repr: DeviceMesh:([[0, 1]])
		p.pos += len("DeviceMesh:")
		v, err := p.pyValue(0)
		if err != nil {
			return nil, err
		}
		if v.kind == pyList && len(v.items) == 1 && v.items[0].kind == pyList {
			v = v.items[0]
		}
		return p.meshFromIDs(v, nil, pyVal{})
	}
	v, err := p.pyValue(0)
	if err != nil {
		return nil, err
	}
	if p.peek() != 0 {
		return nil, p.fail("unexpected %q after the mesh", p.s[p.pos:min(len(p.s), p.pos+10)])
	}
	if v.kind != pyCall {
		return nil, p.failAt(v.start, "expected %s", form)
	}
	m := &Mesh{Name: DefaultMeshName}
	if strings.HasSuffix(v.str, "DeviceMesh") {
		// DeviceMesh(device_type, mesh, mesh_dim_names=(...))
		var ids pyVal
		switch {
		case len(v.items) >= 2:
			ids = v.items[1]
		case len(v.items) == 1 && v.items[0].kind == pyList:
			ids = v.items[0]
		default:
			if kv, ok := v.kw("mesh"); ok {
				ids = kv
			} else {
				return nil, p.failAt(v.start, "DeviceMesh(...) without its device list; print the mesh with mesh_dim_names")
			}
		}
		names, _ := v.kw("mesh_dim_names")
		return p.meshFromIDs(ids, m, names)
	}
	// Mesh('x': 2, ...) / AbstractMesh(...): dict-like arguments are the axes.
	for _, a := range v.keys {
		if !a.dict {
			continue
		}
		if a.val.kind != pyInt {
			return nil, p.failAt(a.val.start, "axis %q: expected its size, an integer", a.key)
		}
		m.Axes = append(m.Axes, Axis{Name: a.key, Size: int(a.val.num)})
	}
	if len(m.Axes) > 0 {
		return m, nil
	}
	ids, ok := v.kw("device_ids")
	if !ok && len(v.items) > 0 {
		ids = v.items[0]
	}
	names, hasNames := v.kw("axis_names")
	if !hasNames && len(v.items) > 1 {
		names = v.items[1]
	}
	if ids.kind == 0 {
		return nil, p.failAt(v.start, "found neither 'axis': size entries nor device_ids; paste the mesh as print(mesh) shows it, e.g. Mesh('x': 2, 'y': 4)")
	}
	return p.meshFromIDs(ids, m, names)
}

// meshFromIDs builds a mesh from a nested device list (numpy's array([...]) unwrapped)
// and axis names (a tuple of strings; absent: dim0, dim1, ...).
func (p *textParser) meshFromIDs(ids pyVal, m *Mesh, names pyVal) (*Mesh, error) {
	if m == nil {
		m = &Mesh{Name: DefaultMeshName}
	}
	if ids.kind == pyCall && (ids.str == "array" || ids.str == "np.array" || ids.str == "numpy.array" || ids.str == "tensor" || ids.str == "torch.tensor") && len(ids.items) > 0 {
		ids = ids.items[0]
	}
	flat, shape, err := p.pyInts(ids)
	if err != nil {
		return nil, err
	}
	if names.kind == pyStr { // a one-axis tuple printed without its comma
		names = pyVal{kind: pyList, start: names.start, items: []pyVal{names}}
	}
	if names.kind != 0 {
		if names.kind != pyList {
			return nil, p.failAt(names.start, "expected the axis names as a tuple of strings")
		}
		if len(names.items) != len(shape) {
			return nil, p.failAt(names.start, "%d axis names for a device list of %d dims", len(names.items), len(shape))
		}
	}
	for d, n := range shape {
		name := "dim" + strconv.Itoa(d)
		if names.kind != 0 {
			it := names.items[d]
			if it.kind != pyStr {
				return nil, p.failAt(it.start, "expected an axis name in quotes")
			}
			name = it.str
		}
		m.Axes = append(m.Axes, Axis{Name: name, Size: n})
	}
	n := len(flat)
	for i, id := range flat {
		if id < 0 || id >= n {
			return nil, p.failAt(ids.start, "device %d (at position %d) is not in 0..%d: shardplan numbers a mesh's devices 0..N-1, so give the mesh's own devices (a submesh's ranks renumbered from 0)", id, i, n-1)
		}
	}
	m.DeviceIDs = flat
	return m, nil
}

// sdyMesh reads sdy.mesh @name = <["x"=2, "y"=4], device_ids=[...]> and its
// attribute forms #sdy.mesh<...> and <...>.
func (p *textParser) sdyMesh() (*Mesh, error) {
	m := &Mesh{Name: DefaultMeshName}
	p.skip()
	switch rest := p.s[p.pos:]; {
	case strings.HasPrefix(rest, "sdy.mesh"):
		p.pos += len("sdy.mesh")
		if p.peek() == '@' {
			p.pos++
			start := p.pos
			for p.pos < len(p.s) && (isIdent(p.s[p.pos]) || p.s[p.pos] == '.') {
				p.pos++
			}
			m.Name = p.s[start:p.pos]
			if err := p.expect('='); err != nil {
				return nil, err
			}
		}
	case strings.HasPrefix(rest, "#sdy.mesh"):
		p.pos += len("#sdy.mesh")
	}
	if err := p.expect('<'); err != nil {
		return nil, err
	}
	if p.peek() == '[' {
		p.pos++
		for p.peek() != ']' {
			a, err := p.axis0()
			if err != nil {
				return nil, err
			}
			m.Axes = append(m.Axes, a)
			if p.peek() == ',' {
				p.pos++
				continue
			}
			if p.peek() != ']' {
				return nil, p.fail("expected ',' or ']'")
			}
		}
		p.pos++
		if p.peek() == ',' {
			p.pos++
		}
	}
	if p.skip(); strings.HasPrefix(p.s[p.pos:], "device_ids") {
		p.pos += len("device_ids")
		if err := p.expect('='); err != nil {
			return nil, err
		}
		v, err := p.pyValue(0)
		if err != nil {
			return nil, err
		}
		flat, shape, err := p.pyInts(v)
		if err != nil {
			return nil, err
		}
		if len(shape) != 1 {
			return nil, p.failAt(v.start, "device_ids must be a flat list")
		}
		m.DeviceIDs = flat
	}
	if err := p.expect('>'); err != nil {
		return nil, err
	}
	if p.peek() != 0 {
		return nil, p.fail("unexpected %q after the mesh", p.s[p.pos:min(len(p.s), p.pos+10)])
	}
	return m, nil
}

// axis0 reads one "name"=size of an sdy.mesh.
func (p *textParser) axis0() (Axis, error) {
	p.skip()
	if err := p.expect('"'); err != nil {
		return Axis{}, err
	}
	end := strings.IndexByte(p.s[p.pos:], '"')
	if end < 0 {
		return Axis{}, p.fail("unterminated axis name")
	}
	name := p.s[p.pos : p.pos+end]
	p.pos += end + 1
	if err := p.expect('='); err != nil {
		return Axis{}, err
	}
	n, err := p.number()
	if err != nil {
		return Axis{}, err
	}
	return Axis{Name: name, Size: n}, nil
}
