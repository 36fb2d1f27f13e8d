package api

import (
	"encoding/json"
	"unicode/utf8"
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
		key := r.str()
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
