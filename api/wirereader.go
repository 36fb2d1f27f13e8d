package api

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
)

// wireReader walks a valid JSON document (json.Valid checked it), so it tracks
// positions without checking syntax.
type wireReader struct {
	b []byte
	i int
}

func (r *wireReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek is the first byte of the next value.
func (r *wireReader) peek() byte {
	r.ws()
	return r.b[r.i]
}

// valueWord names the next value's JSON type as encoding/json's type errors do.
func (r *wireReader) valueWord() string {
	switch r.peek() {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// object calls field with r at each member's value; field must consume it.
func (r *wireReader) object(field func(key string)) {
	r.i++ // {
	for {
		r.ws()
		if r.b[r.i] == '}' {
			r.i++
			return
		}
		if r.b[r.i] == ',' {
			r.i++
			r.ws()
		}
		key := r.constStr()
		r.ws()
		r.i++ // :
		r.ws()
		field(key)
	}
}

// array calls elem with r at each element; elem must consume it.
func (r *wireReader) array(elem func(i int)) {
	r.i++ // [
	for n := 0; ; n++ {
		r.ws()
		if r.b[r.i] == ']' {
			r.i++
			return
		}
		if r.b[r.i] == ',' {
			r.i++
			r.ws()
		}
		elem(n)
	}
}

// str reads a string token, unescaped as encoding/json does.
func (r *wireReader) str() string {
	start := r.i
	r.i++
	escaped := false
	for {
		c := r.b[r.i]
		if c == '"' {
			break
		}
		if c == '\\' {
			escaped = true
			r.i++
		}
		r.i++
	}
	r.i++
	tok := r.b[start:r.i]
	inner := tok[1 : len(tok)-1]
	if !escaped && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(tok, &s) // escapes and invalid UTF-8, as encoding/json reads them
	return s
}

// constStr is str for the strings a graph body repeats for every tensor and op (member
// names, op kinds, dtypes, attribute names): one of wireConsts comes back as the
// constant instead of a new string each time. Any other string is read by str.
func (r *wireReader) constStr() string {
	end := r.i + 1
	for end < len(r.b) && r.b[end] != '"' && r.b[end] != '\\' {
		end++
	}
	if end < len(r.b) && r.b[end] == '"' {
		if s, ok := wireConsts[string(r.b[r.i+1:end])]; ok {
			r.i = end + 1
			return s
		}
	}
	return r.str()
}

// wireConsts holds the strings constStr returns without allocating.
var wireConsts = func() map[string]string {
	m := map[string]string{}
	for _, list := range [][]string{
		{"mesh", "module", "function", "tensors", "ops", "inputs", "outputs", "options", "cost_model", "strategy", "include", "policy"},
		{"shape", "dtype", "sharding", "name", "op", "operands", "results", "attrs", "rule", "cond", "body", "params", "returns"},
		propagation.SupportedOps(), sharding.DTypeNames(),
		{"equation", "dimensions", "broadcast_dimensions", "permutation", "iota_dimension",
			"lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions", "rhs_contracting_dimensions",
			"dimension", "start_indices", "limit_indices", "strides", "slice_sizes", "edge_padding_low", "edge_padding_high",
			"interior_padding", "dot_dimension_numbers", "dimension_numbers"},
	} {
		for _, s := range list {
			m[s] = s
		}
	}
	return m
}()

// skip passes over the next value.
func (r *wireReader) skip() {
	r.ws()
	switch r.b[r.i] {
	case '"':
		r.str()
	case '{', '[':
		depth := 0
		for {
			switch r.b[r.i] {
			case '{', '[':
				depth++
				r.i++
			case '}', ']':
				depth--
				r.i++
				if depth == 0 {
					return
				}
			case '"':
				r.skipString()
			default:
				r.i++
			}
		}
	default: // number, true, false, null
		for r.i < len(r.b) {
			switch r.b[r.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			r.i++
		}
	}
}

func (r *wireReader) skipString() {
	r.i++
	for r.b[r.i] != '"' {
		if r.b[r.i] == '\\' {
			r.i++
		}
		r.i++
	}
	r.i++
}

// raw returns the next value's bytes (aliasing the body).
func (r *wireReader) raw() json.RawMessage {
	r.ws()
	start := r.i
	r.skip()
	return json.RawMessage(r.b[start:r.i])
}

// value reads any value as encoding/json does into an any with UseNumber.
func (r *wireReader) value() any {
	switch c := r.peek(); c {
	case '{':
		m := map[string]any{}
		r.object(func(key string) { m[key] = r.value() })
		return m
	case '[':
		a := []any{}
		r.array(func(int) { a = append(a, r.value()) })
		return a
	case '"':
		return r.str()
	case 't', 'f':
		r.skip()
		return c == 't'
	case 'n':
		r.skip()
		return nil
	}
	return json.Number(r.raw())
}
