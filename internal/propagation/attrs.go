package propagation

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/shardplan/shardplan/internal/sharding"
)

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// attrs reads an op's attributes with errors naming the wire path
// (ops[3].attrs.permutation) and the op.
type attrs struct {
	m     map[string]any
	field string // path of the attrs object: "ops[3].attrs"
	op    *Op
}

func (a attrs) errf(name, format string, args ...any) error {
	f := a.field
	if name != "" {
		f += "." + name
	}
	return sharding.Fieldf(f, "op %q (%s): "+format, append([]any{a.op.Name, a.op.Kind}, args...)...)
}

// sub returns the nested attribute object name, or a with the same map when there is no
// such object (StableHLO dimension numbers may be given flat or nested).
func (a attrs) sub(names ...string) attrs {
	for _, n := range names {
		if v, ok := a.m[n]; ok {
			if m, ok := v.(map[string]any); ok {
				return attrs{m: m, field: a.field + "." + n, op: a.op}
			}
		}
	}
	return a
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		return int64(x), true
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// ints reads an integer array attribute; a missing one is nil with ok false.
func (a attrs) ints(name string, required bool) ([]int64, error) {
	v, ok := a.m[name]
	if !ok || v == nil {
		if required {
			return nil, a.errf(name, "is required (an array of integers)")
		}
		return nil, nil
	}
	switch x := v.(type) {
	case []int64:
		return slices.Clone(x), nil
	case []int:
		out := make([]int64, len(x))
		for i, n := range x {
			out[i] = int64(n)
		}
		return out, nil
	case []any:
		out := make([]int64, len(x))
		for i, e := range x {
			n, ok := toInt(e)
			if !ok {
				return nil, a.errf(name+"["+strconv.Itoa(i)+"]", "must be an integer")
			}
			out[i] = n
		}
		return out, nil
	}
	return nil, a.errf(name, "must be an array of integers")
}

// int reads an integer attribute, def when missing.
func (a attrs) int(name string, def int64) (int64, error) {
	v, ok := a.m[name]
	if !ok || v == nil {
		return def, nil
	}
	n, ok := toInt(v)
	if !ok {
		return 0, a.errf(name, "must be an integer")
	}
	return n, nil
}

// str reads a string attribute.
func (a attrs) str(name string) (string, bool, error) {
	v, ok := a.m[name]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, a.errf(name, "must be a string")
	}
	return s, true, nil
}

// dimList reads a list of distinct dims of a rank-rank tensor.
func (a attrs) dimList(name string, rank int, required bool) ([]int, error) {
	xs, err := a.ints(name, required)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(xs))
	seen := map[int64]int{}
	for i, x := range xs {
		if x < 0 || x >= int64(rank) {
			return nil, a.errf(name+"["+strconv.Itoa(i)+"]", "dim %d is out of range for rank %d", x, rank)
		}
		if j, dup := seen[x]; dup {
			return nil, a.errf(name+"["+strconv.Itoa(i)+"]", "dim %d is listed twice (also at [%d])", x, j)
		}
		seen[x] = i
		out[i] = int(x)
	}
	return out, nil
}
