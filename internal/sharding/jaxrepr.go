package sharding

import (
	"regexp"
	"strconv"
	"strings"
)

// What jax.Array.sharding prints: NamedSharding(mesh=Mesh('data': 2, 'model': 4,
// axis_types=(Auto, Auto)), spec=PartitionSpec('data', None), memory_kind=device), or
// GSPMDSharding({devices=[2,1,4]<=[8] last_tile_dim_replicate}, memory_kind=device).

// isJAXRepr reports whether text starts like the repr of a JAX sharding object.
func isJAXRepr(text string) bool {
	t := strings.TrimSpace(text)
	return strings.HasPrefix(t, "NamedSharding(") || strings.HasPrefix(t, "GSPMDSharding(")
}

var reprAxisRE = regexp.MustCompile(`'([A-Za-z_][A-Za-z0-9_]*)'\s*:\s*([0-9]+)`)

// parseJAXRepr reads the repr of a JAX NamedSharding (its spec, after checking that its
// mesh's axes are the request mesh's) or GSPMDSharding (its HLO sharding). Other
// arguments (memory_kind) are ignored. Errors name field and the character offset.
func parseJAXRepr(text string, m *Mesh, shape []int64, field string) (Sharding, error) {
	p := &textParser{s: text, field: field, m: m}
	p.skip()
	if strings.HasPrefix(p.s[p.pos:], "GSPMDSharding(") {
		p.pos += len("GSPMDSharding(")
		sp, err := p.hloSharding(m.NumDevices())
		if err != nil {
			return Sharding{}, err
		}
		if c := p.peek(); c != ',' && c != ')' {
			return Sharding{}, p.fail("expected ',' or ')' after the HLO sharding")
		}
		return sp.express(p, m, shape)
	}
	start := p.pos
	meshAt := strings.Index(p.s[start:], "mesh=")
	specAt := strings.Index(p.s[start:], "spec=")
	if specAt < 0 {
		return Sharding{}, p.fail("NamedSharding(...) without spec=; give spec=PartitionSpec(...)")
	}
	if meshAt >= 0 && meshAt < specAt {
		// Check the axes the repr prints ('data': 2, ...) against the request's mesh.
		meshText := p.s[start+meshAt : start+specAt]
		if found := reprAxisRE.FindAllStringSubmatch(meshText, -1); len(found) > 0 {
			same := len(found) == len(m.Axes)
			parts := make([]string, len(found))
			for i, f := range found {
				parts[i] = f[1] + "=" + f[2]
				n, _ := strconv.Atoi(f[2])
				same = same && i < len(m.Axes) && m.Axes[i].Name == f[1] && m.Axes[i].Size == n
			}
			if !same {
				return Sharding{}, p.failAt(start+meshAt, "the NamedSharding's mesh is %s but the request's mesh is %s; send the same mesh (axes in the same order)", strings.Join(parts, ","), m.String())
			}
		}
	}
	p.pos = start + specAt + len("spec=")
	s, pt, err := p.partitionSpec()
	if err != nil {
		return Sharding{}, err
	}
	if c := p.peek(); c != ',' && c != ')' {
		return Sharding{}, p.fail("expected ',' or ')' after the PartitionSpec")
	}
	return finishSpec(s, pt, m, shape)
}
