package sharding

import (
	"sort"
	"strings"
)

// dtypeBits is the size in bits of each element type shardplan knows.
var dtypeBits = map[string]int{
	"pred": 8, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16, "bf16": 16,
	"s32": 32, "u32": 32, "f32": 32, "s64": 64, "u64": 64, "f64": 64,
	"c64": 64, "c128": 128, "f8e4m3fn": 8, "f8e5m2": 8, "s4": 4, "u4": 4,
}

// dtypeAliases maps NumPy/JAX/PyTorch spellings (after any "np."/"jnp."/"torch."
// prefix is dropped) to the XLA names above.
var dtypeAliases = map[string]string{
	"bool": "pred", "bool_": "pred",
	"int4": "s4", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64",
	"uint4": "u4", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
	"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
	"complex64": "c64", "complex128": "c128",
	"float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2",
	"half": "f16", "single": "f32", "double": "f64",
}

// torchAliases are PyTorch's own short names, valid only with the "torch." prefix
// (NumPy's float and int mean 64 bits, PyTorch's 32).
var torchAliases = map[string]string{
	"float": "f32", "int": "s32", "long": "s64", "short": "s16", "cfloat": "c64", "cdouble": "c128",
}

// DTypeBits returns the element size in bits of the named dtype: an XLA name (f32, bf16,
// pred, ...) or a NumPy/JAX/PyTorch spelling (float32, bfloat16, bool, jnp.float32,
// np.int8, torch.float16, torch.half, dtype('float32')).
func DTypeBits(name string) (int, bool) {
	b, ok := dtypeBits[CanonicalDType(name)]
	return b, ok
}

// CanonicalDType returns the XLA name of a dtype spelled as DTypeBits accepts, or name
// unchanged when it is unknown.
func CanonicalDType(name string) string {
	n := strings.TrimSpace(name)
	if _, ok := dtypeBits[n]; ok {
		return n
	}
	if inner, ok := strings.CutPrefix(n, "dtype("); ok && strings.HasSuffix(inner, ")") {
		n = strings.Trim(strings.TrimSuffix(inner, ")"), `'"`)
	}
	torch := false
	for _, prefix := range []string{"jax.numpy.", "numpy.", "jnp.", "np.", "torch.", "ml_dtypes."} {
		if rest, ok := strings.CutPrefix(n, prefix); ok {
			n, torch = rest, prefix == "torch."
			break
		}
	}
	if _, ok := dtypeBits[n]; ok {
		return n
	}
	if c, ok := dtypeAliases[n]; ok {
		return c
	}
	if c, ok := torchAliases[n]; ok && torch {
		return c
	}
	return name
}

// DTypeNames lists the known dtypes, sorted.
func DTypeNames() []string {
	names := make([]string, 0, len(dtypeBits))
	for n := range dtypeBits {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// KnownDTypes is DTypeNames joined with spaces (for messages), plus a note on the
// NumPy/JAX/PyTorch spellings.
func KnownDTypes() string {
	return strings.Join(DTypeNames(), " ") + " (or the NumPy/JAX/PyTorch names: float32, bfloat16, int8, bool, jnp.float32, torch.float16, ...)"
}

// BufferBytes is the size in bytes of a buffer of n elements of elemBits bits each;
// sub-byte buffers round up.
func BufferBytes(n int64, elemBits int) int64 {
	return (n*int64(elemBits) + 7) / 8
}
