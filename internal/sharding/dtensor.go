package sharding

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// PyTorch DTensor placements: one per mesh dim, in mesh axis order. Shard(d) splits
// tensor dim d over that mesh dim; several Shard(d) split it over their mesh dims in mesh
// dim order, the first one major (DTensor shards the local chunk again for each later
// mesh dim); _StridedShard(d, split_factor=f) moves its mesh dim after the next plain
// Shard(d), as torch.distributed.tensor._utils._explicit_order_placements does (f must
// be the product of the sizes of the mesh dims placed before it). Partial() and
// Partial(sum) are partial sums (unreduced); Replicate() is replication.

// placement is one parsed placement.
type placement struct {
	kind  byte // 'S' shard, 'T' strided shard, 'R' replicate, 'P' partial
	dim   int
	split int
}

// parsePlacements reads the {"placements": [...]} object form.
func parsePlacements(raw json.RawMessage, m *Mesh, shape []int64, field string) (Sharding, error) {
	if b := bytes.TrimSpace(raw); len(b) > 0 && b[0] == '"' {
		// "placements": "(Shard(dim=0), Replicate())", the tuple as torch prints it.
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return Sharding{}, Fieldf(field, "is not a valid JSON string")
		}
		return parsePlacementsText(text, m, shape, field)
	}
	items, fe := rawList(raw, field, "placement strings such as \"Shard(0)\", \"Replicate()\", \"Partial()\"")
	if fe != nil {
		return Sharding{}, fe
	}
	texts := make([]string, len(items))
	fields := make([]string, len(items))
	var errs Errors
	for i, it := range items {
		fields[i] = index(field, i)
		if err := json.Unmarshal(it, &texts[i]); err != nil {
			errs = append(errs, Fieldf(fields[i], "must be a placement string such as \"Shard(0)\", \"Replicate()\" or \"Partial()\""))
		}
	}
	if len(errs) > 0 {
		return Sharding{}, errs
	}
	if len(texts) == 1 && isPlacementsTupleText(texts[0]) {
		// "placements": "(Shard(dim=0), Replicate())", as torch prints the tuple.
		return parsePlacementsText(texts[0], m, shape, fields[0])
	}
	return placementsSharding(texts, fields, m, shape, field)
}

// placementsSharding reads one placement text per mesh dim; fields[i] names the i-th
// in errors and field the whole list.
func placementsSharding(texts, fields []string, m *Mesh, shape []int64, field string) (Sharding, error) {
	if len(texts) != len(m.Axes) {
		return Sharding{}, Fieldf(field, "has %d placements but the mesh has %d axes (%s); give one placement per mesh dim, in mesh axis order", len(texts), len(m.Axes), m.axisNames())
	}
	ps := make([]placement, len(texts))
	var errs Errors
	maxDim := -1
	for i, text := range texts {
		f := fields[i]
		p, err := parsePlacement(text, f, len(shape), shape != nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ps[i] = p
		if p.kind == 'S' || p.kind == 'T' {
			maxDim = max(maxDim, p.dim)
		}
	}
	if len(errs) > 0 {
		return Sharding{}, errs
	}
	rank := maxDim + 1
	if shape != nil {
		rank = len(shape)
	}
	s := Replicated(rank)
	// Order the shards of each tensor dim as DTensor applies them.
	deferred := map[int][]int{} // tensor dim -> mesh dims of pending strided shards
	ended := map[int]bool{}
	for i, p := range ps {
		switch p.kind {
		case 'P':
			s.Unreduced = append(s.Unreduced, FullAxis(m.Axes[i]))
		case 'T':
			deferred[p.dim] = append(deferred[p.dim], i)
		case 'S':
			if ended[p.dim] {
				return Sharding{}, Fieldf(fields[i], "Shard(%d) after the strided part of dim %d has ended; DTensor does not support this order", p.dim, p.dim)
			}
			s.Dims[p.dim].Axes = append(s.Dims[p.dim].Axes, FullAxis(m.Axes[i]))
			if pend := deferred[p.dim]; len(pend) > 0 {
				ended[p.dim] = true
				aggregate := m.Axes[i].Size
				for k := len(pend) - 1; k >= 0; k-- {
					j := pend[k]
					if ps[j].split != aggregate {
						return Sharding{}, Fieldf(fields[j], "_StridedShard(%d, split_factor=%d): split_factor must be %d, the size of the mesh dims sharding dim %d after it", p.dim, ps[j].split, aggregate, p.dim)
					}
					aggregate *= m.Axes[j].Size
					s.Dims[p.dim].Axes = append(s.Dims[p.dim].Axes, FullAxis(m.Axes[j]))
				}
				delete(deferred, p.dim)
			}
		}
	}
	for d, pend := range deferred {
		return Sharding{}, Fieldf(fields[pend[0]], "_StridedShard(%d, ...) needs a later Shard(%d) on another mesh dim", d, d)
	}
	return finish(s, m, shape, objPather(field))
}

// parsePlacement reads one placement: Shard(0), Shard(dim=0), S(0), Replicate(), R,
// Partial(), Partial(sum), Partial(reduce_op='sum'), P, _StridedShard(0, split_factor=2),
// _StridedShard(dim=0, sf=2).
// Negative dims count from the end when the rank is known.
func parsePlacement(text, field string, rank int, rankKnown bool) (placement, *FieldError) {
	t := strings.TrimSpace(text)
	name, args, hasArgs := strings.Cut(t, "(")
	name = strings.TrimSpace(name)
	if hasArgs {
		var ok bool
		if args, ok = strings.CutSuffix(strings.TrimSpace(args), ")"); !ok {
			return placement{}, Fieldf(field, "%q is missing its closing ')'", text)
		}
	}
	args = strings.TrimSpace(args)
	// kwargs and positional args; strip keyword names and quotes.
	var vals []string
	keys := map[string]string{}
	if args != "" {
		for k, a := range strings.Split(args, ",") {
			a = strings.TrimSpace(a)
			if key, v, ok := strings.Cut(a, "="); ok {
				keys[strings.TrimSpace(key)] = strings.Trim(strings.TrimSpace(v), `'"`)
				continue
			}
			if a == "" && k > 0 {
				continue // trailing comma
			}
			vals = append(vals, strings.Trim(a, `'"`))
		}
	}
	arg := func(pos int, key string) (string, bool) {
		if v, ok := keys[key]; ok {
			return v, true
		}
		if pos < len(vals) {
			return vals[pos], true
		}
		return "", false
	}
	dimArg := func() (int, *FieldError) {
		v, ok := arg(0, "dim")
		if !ok {
			return 0, Fieldf(field, "%q needs the tensor dim, e.g. Shard(0)", text)
		}
		d, err := strconv.Atoi(v)
		if err != nil || d > 1<<20 || d < -(1<<20) {
			return 0, Fieldf(field, "%q: the tensor dim %q is not an integer", text, v)
		}
		if d < 0 {
			if !rankKnown {
				return 0, Fieldf(field, "%q: a negative dim needs the tensor's shape", text)
			}
			d += rank
		}
		if d < 0 || (rankKnown && d >= rank) {
			return 0, Fieldf(field, "%q: tensor dim out of range for a rank-%d tensor", text, rank)
		}
		return d, nil
	}
	switch name {
	case "Shard", "S":
		d, fe := dimArg()
		return placement{kind: 'S', dim: d}, fe
	case "_StridedShard":
		d, fe := dimArg()
		if fe != nil {
			return placement{}, fe
		}
		v, ok := arg(1, "split_factor")
		if sf, short := keys["sf"]; short && !ok { // torch's repr: _StridedShard(dim=0, sf=2)
			v, ok = sf, true
		}
		sf, err := strconv.Atoi(v)
		if !ok || err != nil || sf < 1 {
			return placement{}, Fieldf(field, "%q needs split_factor, a positive integer", text)
		}
		return placement{kind: 'T', dim: d, split: sf}, nil
	case "Replicate", "R":
		return placement{kind: 'R'}, nil
	case "Partial", "P", "_Partial":
		op, ok := arg(0, "reduce_op")
		if op = strings.ToLower(op); !ok || op == "sum" || op == "redop_sum" {
			return placement{kind: 'P'}, nil
		}
		return placement{}, Fieldf(field, "%q: only Partial(sum) is modelled (partial sums, reduced with all-reduce or reduce-scatter); a %s reduction has no unreduced form here", text, op)
	}
	return placement{}, Fieldf(field, "unknown placement %q; use Shard(d), Replicate(), Partial() or _StridedShard(d, split_factor=f)", text)
}

// isPlacementsTupleText reports whether t is a tuple or list of placements as torch
// prints one: "(Shard(dim=0), Replicate())".
func isPlacementsTupleText(t string) bool {
	t = strings.TrimSpace(t)
	return (strings.HasPrefix(t, "(") || strings.HasPrefix(t, "[")) && placementsTuple(t)
}
