package stablehlo

import (
	"regexp"
	"slices"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// This file picks the mesh of an imported module: the request's, or the one its
// shardings name.

var meshRefRE = regexp.MustCompile(`^#?(?:sdy\.)?(?:sharding(?:_per_value)?)?<\[?<?@([A-Za-z_][A-Za-z0-9_.$-]*)`)

// pickMesh chooses the one mesh the function's sdy shardings use (meshes without axes,
// Shardy's maximal meshes, are ignored), or the request's.
func (b *builder) pickMesh(fn *Func, req *sharding.Mesh) error {
	decls := map[string]*MeshDecl{}
	for _, d := range b.imp.Module.Meshes {
		decls[d.Name] = d
		b.imp.declared[d.Name] = true
	}
	used := map[string]int{}
	order := b.meshesUsed(fn, decls, used)
	if len(order) > 1 {
		b.errAt(used[order[1]], "function @%s uses %d meshes (@%s); shardplan plans on one mesh per request", fn.Name, len(order), strings.Join(order, ", @"))
		return b.err
	}
	if len(order) == 0 {
		// No sdy sharding: the request's mesh, or the module's only mesh.
		if req != nil {
			b.mesh, b.imp.Mesh = req, req
			return nil
		}
		d := b.onlyMesh()
		if d == nil {
			return sharding.Fieldf("mesh", "is required: the module declares no sdy.mesh its function uses; give the request's \"mesh\" or declare sdy.mesh @mesh = <[\"x\"=2, ...]>")
		}
		order = []string{d.Name}
		used[d.Name] = d.Pos
	}
	name := order[0]
	m, err := b.declaredMesh(name, decls[name], used[name])
	if err != nil {
		return err
	}
	if req != nil && !req.SameLayout(m) {
		return sharding.Fieldf("mesh", "the request's mesh %s differs from the module's sdy.mesh @%s (%s); leave \"mesh\" out to use the module's", req.String(), name, m.String())
	}
	b.mesh = m
	b.imp.Mesh = m
	return nil
}

// meshesUsed returns the meshes the sdy shardings of fn and its callees name, in the
// order they are first used, and records each one's first position in used. Meshes
// declared without axes (Shardy's maximal meshes) are left out.
func (b *builder) meshesUsed(fn *Func, decls map[string]*MeshDecl, used map[string]int) []string {
	var order []string
	note := func(text string, pos int) {
		if mm := meshRefRE.FindStringSubmatch(text); mm != nil {
			if d, ok := decls[mm[1]]; ok && len(d.Axes) == 0 {
				return
			}
			if _, seen := used[mm[1]]; !seen {
				used[mm[1]] = pos
				order = append(order, mm[1])
			}
		}
	}
	var walkOps func(ops []*Op, depth int)
	seenFn := map[string]bool{}
	walkFn := func(f *Func, depth int) {
		if seenFn[f.Name] || depth > b.lim.MaxDepth {
			return
		}
		seenFn[f.Name] = true
		for _, p := range slices.Concat(f.Args, f.Results) {
			if r, ok := p.Attrs.Vals["sdy.sharding"].(Raw); ok {
				note(r.Text, p.Attrs.Pos["sdy.sharding"])
			}
		}
		if f.Body != nil {
			walkOps(f.Body.Ops, depth)
		}
	}
	walkOps = func(ops []*Op, depth int) {
		for _, op := range ops {
			if r, ok := op.Attrs.Vals["sdy.sharding"].(Raw); ok {
				note(r.Text, op.Attrs.Pos["sdy.sharding"])
			}
			if op.Name == "sdy.sharding_constraint" || op.Name == "sdy.reshard" {
				if text, pos, _, ok := constraintSharding(op); ok {
					note(text, pos)
				}
			}
			if op.Name == "func.call" {
				if callee := calleeOf(op); callee != "" && b.funcs[callee] != nil {
					walkFn(b.funcs[callee], depth+1)
				}
			}
			for _, r := range op.Regions {
				walkOps(r.Ops, depth+1)
			}
		}
	}
	walkFn(fn, 0)
	return order
}

// onlyMesh returns the module's one mesh with axes, or nil when it has none or several.
func (b *builder) onlyMesh() *MeshDecl {
	var withAxes []*MeshDecl
	for _, d := range b.imp.Module.Meshes {
		if len(d.Axes) > 0 {
			withAxes = append(withAxes, d)
		}
	}
	if len(withAxes) == 1 {
		return withAxes[0]
	}
	return nil
}

// declaredMesh builds mesh name from its declaration d (nil: not declared; the mesh is
// first used at pos) within the limits on axes and devices.
func (b *builder) declaredMesh(name string, d *MeshDecl, pos int) (*sharding.Mesh, error) {
	if d == nil {
		b.errAt(pos, "mesh @%s is not declared; add sdy.mesh @%s = <[\"x\"=2, ...]>", name, name)
		return nil, b.err
	}
	if len(d.Axes) > b.lim.MaxMeshAxes {
		b.errAt(d.Pos, "mesh @%s has %d axes; the limit is %d (SHARDPLAN_MAX_MESH_AXES)", name, len(d.Axes), b.lim.MaxMeshAxes)
		return nil, b.err
	}
	axes := make([]sharding.Axis, len(d.Axes))
	n := int64(1)
	for i, a := range d.Axes {
		axes[i] = sharding.Axis{Name: a.Name, Size: a.Size}
		if a.Size > 0 {
			n *= int64(a.Size)
		}
		if n > int64(b.lim.MaxDevices) {
			b.errAt(d.Pos, "mesh @%s has more than %d devices; the limit is %d (SHARDPLAN_MAX_DEVICES)", name, b.lim.MaxDevices, b.lim.MaxDevices)
			return nil, b.err
		}
	}
	m, err := sharding.NewMesh(name, axes, d.DeviceIDs)
	if err != nil {
		es, _ := sharding.AsFieldErrors(err)
		var msgs []string
		for _, e := range es {
			msgs = append(msgs, e.Error())
		}
		b.errAt(d.Pos, "mesh @%s: %s", name, strings.Join(msgs, "; "))
		return nil, b.err
	}
	return m, nil
}
