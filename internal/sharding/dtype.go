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

// DTypeBits returns the element size in bits of the named dtype.
func DTypeBits(name string) (int, bool) {
	b, ok := dtypeBits[name]
	return b, ok
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

// KnownDTypes is DTypeNames joined with spaces (for messages).
func KnownDTypes() string { return strings.Join(DTypeNames(), " ") }

// BufferBytes is the size in bytes of a buffer of n elements of elemBits bits each;
// sub-byte buffers round up.
func BufferBytes(n int64, elemBits int) int64 {
	return (n*int64(elemBits) + 7) / 8
}
