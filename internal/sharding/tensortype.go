package sharding

import (
	"strconv"
	"strings"
)

// A tensor's type as the frameworks print it, in place of a shape and a dtype:
//
//	tensor<2048x2048xf32>   MLIR (StableHLO, jax's as_text())
//	f32[2048,2048]          XLA HLO (a trailing layout {1,0} is ignored)
//	float32[2048,2048]      jax's ShapedArray, also as ShapedArray(float32[2048,2048])

// mlirElementTypes maps MLIR's element type names to the XLA names dtypeBits knows.
var mlirElementTypes = map[string]string{
	"i1": "pred", "i4": "s4", "i8": "s8", "i16": "s16", "i32": "s32", "i64": "s64",
	"ui4": "u4", "ui8": "u8", "ui16": "u16", "ui32": "u32", "ui64": "u64",
	"f8E4M3FN": "f8e4m3fn", "f8E5M2": "f8e5m2", "complex<f32>": "c64", "complex<f64>": "c128",
}

// ParseTensorType reads a printed tensor type and returns its shape and its dtype's XLA
// name. field names the value in errors, which say what was expected.
func ParseTensorType(text, field string) (shape []int64, dtype string, err error) {
	t := strings.TrimSpace(text)
	if inner, ok := strings.CutPrefix(t, "ShapedArray("); ok {
		t = strings.TrimSpace(strings.TrimSuffix(inner, ")"))
	}
	bad := func(format string, args ...any) ([]int64, string, error) {
		return nil, "", Fieldf(field, format+`; write the tensor as MLIR prints it, "tensor<2048x2048xf32>", or as XLA does, "f32[2048,2048]"`, args...)
	}
	dim := func(s string) (int64, bool) {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		return n, err == nil && n >= 1
	}
	if body, ok := strings.CutPrefix(t, "tensor<"); ok {
		body, ok = strings.CutSuffix(body, ">")
		if !ok {
			return bad("%q is missing its closing '>'", text)
		}
		if i := strings.Index(body, ","); i >= 0 { // an encoding (#sdy.sharding<...>) is not a type
			body = body[:i]
		}
		// The element type follows the last 'x' (complex<f32> holds none).
		dims, elem := "", body
		if i := strings.Index(body, "complex<"); i >= 0 {
			dims, elem = strings.TrimSuffix(body[:i], "x"), body[i:]
		} else if i := strings.LastIndexByte(body, 'x'); i >= 0 {
			dims, elem = body[:i], body[i+1:]
		}
		var parts []string
		if dims != "" {
			parts = strings.Split(dims, "x")
		}
		parts = append(parts, elem)
		for i, d := range parts[:len(parts)-1] {
			n, ok := dim(d)
			if !ok {
				if strings.TrimSpace(d) == "?" {
					return bad("dim %d is dynamic ('?'); shardplan plans static shapes", i)
				}
				return bad("dim %d (%q) is not a size >= 1", i, d)
			}
			shape = append(shape, n)
		}
		name := strings.TrimSpace(elem)
		if x, ok := mlirElementTypes[name]; ok {
			name = x
		}
		if _, ok := DTypeBits(name); !ok {
			return bad("unknown element type %q (known: %s, and MLIR's i1, i8, ..., ui8, ...)", elem, KnownDTypes())
		}
		return shape, CanonicalDType(name), nil
	}
	open := strings.IndexByte(t, '[')
	close := strings.IndexByte(t, ']')
	if open <= 0 || close < open {
		return bad("%q is not a tensor type", text)
	}
	name := t[:open]
	if _, ok := DTypeBits(name); !ok {
		return bad("unknown element type %q (known: %s)", name, KnownDTypes())
	}
	rest := strings.TrimSpace(t[close+1:])
	if rest != "" && !(strings.HasPrefix(rest, "{") && strings.HasSuffix(rest, "}")) {
		return bad("unexpected %q after the dims", rest)
	}
	if dims := strings.TrimSpace(t[open+1 : close]); dims != "" {
		for i, d := range strings.Split(dims, ",") {
			n, ok := dim(d)
			if !ok {
				return bad("dim %d (%q) is not a size >= 1", i, d)
			}
			shape = append(shape, n)
		}
	}
	return shape, CanonicalDType(name), nil
}
