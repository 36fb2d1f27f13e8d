package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

// graphKey hashes the canonical graph request: annotations by their canonical text, ops
// as decoded, so equal graphs in any input form share a plan id. The hashed bytes are
// json.Marshal's (a head array, a [id, shape, elem bits, annotation] array per tensor in
// id order, then the ops as propagation.Op marshals), written by hand for the tensors and
// ops; graphkey_test.go checks them against json.Marshal.
func graphKey(in *graphInput) (string, error) {
	h := sha256.New()
	model := modelFingerprint(in.model)
	inc := slices.Clone(in.req.Include)
	slices.Sort(inc)
	inc = slices.Compact(inc)
	parts := []any{planner.Version, "graph", in.mesh.String(), in.mesh.Name, in.mesh.DeviceIDs,
		model, string(in.strategy), inc, in.opts, in.graph.Inputs, in.graph.Outputs}
	if in.remat && in.strategy == planner.Optimal {
		// Left out at the default (as is effort_fast): a request that does not set it
		// hashes as if the key had no such part.
		parts = append(parts, "allow_full_rematerialization")
	}
	if in.effort == planner.EffortFast && in.strategy == planner.Optimal {
		parts = append(parts, "effort_fast")
	}
	head, _ := json.Marshal(parts)
	h.Write(head)
	if in.imp != nil {
		// The answer lists the opaque ops with their positions in the module text.
		opaque, _ := json.Marshal(in.imp.Opaque)
		h.Write(opaque)
	}
	e := jsonAppender{html: true, b: make([]byte, 0, 64<<10)}
	flush := func() {
		if len(e.b) >= 32<<10 {
			h.Write(e.b)
			e.b = e.b[:0]
		}
	}
	// Tensors with one annotation share its value (annotations.parse): print it once.
	bodies := map[*sharding.Sharding]string{}
	for _, id := range in.tensorIDs() {
		t := in.graph.Tensors[id]
		ann := "-"
		if t.Sharding != nil {
			b, ok := bodies[t.Sharding]
			if !ok {
				b = t.Sharding.Body()
				bodies[t.Sharding] = b
			}
			ann = b
		}
		e.tensorLine(id, t.Shape, t.ElemBits, ann)
		flush()
	}
	// Ops as decoded: attribute maps are written with sorted keys, so key order and
	// whitespace in the request do not matter.
	if in.graph.Ops == nil {
		e.b = append(e.b, "null"...)
	}
	for i := range in.graph.Ops {
		sep := byte(',')
		if i == 0 {
			sep = '['
		}
		e.b = append(e.b, sep)
		e.op(&in.graph.Ops[i])
		flush()
	}
	if len(in.graph.Ops) > 0 {
		e.b = append(e.b, ']')
	}
	if e.err != nil {
		return "", e.err
	}
	h.Write(e.b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tensorLine appends json.Marshal([]any{id, shape, elemBits, ann}).
func (e *jsonAppender) tensorLine(id string, shape []int64, elemBits int, ann string) {
	e.b = append(e.b, '[')
	e.str(id)
	e.b = append(e.b, ',')
	ints(e, shape)
	e.intAt(",", int64(elemBits))
	e.b = append(e.b, ',')
	e.str(ann)
	e.b = append(e.b, ']')
}

// op appends json.Marshal(o) (propagation.Op has no json tags: members by field name).
func (e *jsonAppender) op(o *propagation.Op) {
	e.strAt(`{"Name":`, o.Name)
	e.strAt(`,"Kind":`, o.Kind)
	e.strsAt(`,"Operands":`, o.Operands)
	e.strsAt(`,"Results":`, o.Results)
	e.b = append(e.b, `,"Attrs":`...)
	e.value(o.Attrs)
	e.strAt(`,"Rule":`, o.Rule)
	e.region(`,"Cond":`, o.Cond)
	e.region(`,"Body":`, o.Body)
	e.b = append(e.b, '}')
}

func (e *jsonAppender) region(member string, r *propagation.Region) {
	e.b = append(e.b, member...)
	if r == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.strsAt(`{"Params":`, r.Params)
	e.b = append(e.b, `,"Ops":`...)
	list(e, r.Ops, e.op)
	e.strsAt(`,"Returns":`, r.Returns)
	e.b = append(e.b, '}')
}

// value appends an attribute value as encoding/json does: the decoded JSON types and
// integer lists by hand, anything else (and NaN, and a number literal that is not
// one) through encoding/json itself.
func (e *jsonAppender) value(v any) {
	switch x := v.(type) {
	case nil:
		e.b = append(e.b, "null"...)
	case string:
		e.str(x)
	case bool:
		e.bool(x)
	case json.Number:
		if !isJSONNumber(string(x)) {
			e.ref(x)
			return
		}
		e.b = append(e.b, x...)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			e.ref(x)
			return
		}
		e.float(x)
	case int:
		e.int(int64(x))
	case int64:
		e.int(x)
	case []int:
		ints(e, x)
	case []int64:
		ints(e, x)
	case []any:
		list(e, x, func(v *any) { e.value(*v) })
	case map[string]any:
		sortedMap(e, x, e.value)
	default:
		e.ref(v)
	}
}

// isJSONNumber reports whether s is a JSON number literal (-?int frac? exp?).
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}
