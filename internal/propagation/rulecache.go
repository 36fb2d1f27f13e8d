package propagation

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
)

// ruleCache shares one built rule between the ops that differ only in their names and
// tensors. A transformer graph repeats a few dozen distinct ops (same kind, operand and
// result shapes, attributes) thousands of times, and building a rule (parsing an
// einsum, allocating its factor lists) was a large part of prepare. Nodes only read
// their rule, and a rule depends on nothing but the op's kind, custom rule text,
// attributes and the shapes of its operands and results, so one value serves them all.
// Only rules that built without error are kept: an error names its op, so a failing op
// is always built on its own.
type ruleCache struct {
	m     map[string]cachedRule
	key   []byte   // the key of the last lookup
	keyOK bool     // whether that op could be keyed
	keys  []string // scratch for sorting attribute names
}

// cachedRule is what buildRule returned for an op signature.
type cachedRule struct {
	rule  *Rule
	class opClass
}

// lookup returns the rule of an op equal to op with operand and result shapes in and
// out, if one was stored.
func (c *ruleCache) lookup(op *Op, in, out [][]int64) (*Rule, opClass, bool) {
	if c.keyOK = c.makeKey(op, in, out); !c.keyOK {
		return nil, 0, false
	}
	hit, ok := c.m[string(c.key)]
	return hit.rule, hit.class, ok
}

// store keeps what buildRule returned without error for the op of the last lookup.
func (c *ruleCache) store(r *Rule, class opClass) {
	if !c.keyOK {
		return
	}
	if c.m == nil {
		c.m = map[string]cachedRule{}
	}
	c.m[string(c.key)] = cachedRule{rule: r, class: class}
}

// makeKey writes op's signature (everything buildRule reads but the op's name and wire
// path) into c.key; it returns false when an attribute has a type the key does not
// encode, and the op is then built without the cache.
func (c *ruleCache) makeKey(op *Op, in, out [][]int64) bool {
	b := c.key[:0]
	b = appendKeyString(b, op.Kind)
	b = appendKeyString(b, op.Rule)
	for _, shapes := range [][][]int64{in, out} {
		b = binary.AppendUvarint(b, uint64(len(shapes)))
		for _, s := range shapes {
			b = binary.AppendUvarint(b, uint64(len(s)))
			for _, n := range s {
				b = binary.AppendVarint(b, n)
			}
		}
	}
	b, ok := c.appendValue(b, op.Attrs)
	c.key = b
	return ok
}

// appendKeyString appends s with its length, so that no two lists of strings share a
// key.
func appendKeyString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendValue appends an attribute value with a tag per Go type: the rule builders
// accept some types and reject others (a float64 2.5 is not an integer), so values of
// different types never share a key even when they print alike.
func (c *ruleCache) appendValue(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, 'z'), true
	case bool:
		if x {
			return append(b, 't'), true
		}
		return append(b, 'f'), true
	case string:
		return appendKeyString(append(b, 's'), x), true
	case json.Number:
		return appendKeyString(append(b, 'n'), string(x)), true
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, 'd'), math.Float64bits(x)), true
	case int:
		return binary.AppendVarint(append(b, 'i'), int64(x)), true
	case int64:
		return binary.AppendVarint(append(b, 'I'), x), true
	case int32:
		return binary.AppendVarint(append(b, 'h'), int64(x)), true
	case []int:
		b = binary.AppendUvarint(append(b, 'a'), uint64(len(x)))
		for _, n := range x {
			b = binary.AppendVarint(b, int64(n))
		}
		return b, true
	case []int64:
		b = binary.AppendUvarint(append(b, 'A'), uint64(len(x)))
		for _, n := range x {
			b = binary.AppendVarint(b, n)
		}
		return b, true
	case []any:
		b = binary.AppendUvarint(append(b, 'l'), uint64(len(x)))
		for _, e := range x {
			var ok bool
			if b, ok = c.appendValue(b, e); !ok {
				return b, false
			}
		}
		return b, true
	case map[string]any:
		return c.appendMap(b, x)
	}
	return b, false
}

// appendMap appends an attribute object with its names sorted. A nil map and an empty
// one read the same to the rule builders, and share a key.
func (c *ruleCache) appendMap(b []byte, m map[string]any) ([]byte, bool) {
	b = binary.AppendUvarint(append(b, 'm'), uint64(len(m)))
	start := len(c.keys)
	for k := range m {
		c.keys = append(c.keys, k)
	}
	names := c.keys[start:]
	slices.Sort(names)
	ok := true
	for _, k := range names {
		b = appendKeyString(b, k)
		if b, ok = c.appendValue(b, m[k]); !ok {
			break
		}
	}
	c.keys = c.keys[:start]
	return b, ok
}
