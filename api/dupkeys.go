package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Strict JSON: encoding/json lets the last of two equal keys win, so {"mesh": "x=2",
// "mesh": "x=4"} would plan for a mesh the caller may not have meant. duplicateKey finds
// the first key that repeats within one object, anywhere in the body, in one pass over
// the bytes (no tokens, no values decoded).

// maxLinearKeys is how many keys an object's frame compares linearly before it switches
// to a set (a tensors map has one key per tensor).
const maxLinearKeys = 16

// dupFrame is one open object or array of the scan.
type dupFrame struct {
	array bool
	// exact: this object is a map whose keys are data (tensor ids, attribute names) and
	// compare exactly; the keys of any other object are struct fields, which
	// encoding/json and the graph reader match without regard to case, so they compare
	// case-folded ({"mesh": ..., "MESH": ...} is a repeat). exactTree: so is every
	// object under this one (attrs, cost_model).
	exact, exactTree bool
	idx              int      // array: index of the current element (-1 before the first)
	key              []byte   // object: the current key, unescaped
	keys             [][]byte // object: keys seen so far, while few
	set              map[string]struct{}
}

// seen records key in the frame and reports whether it was there already.
func (f *dupFrame) seen(key []byte) bool {
	if !f.exact {
		key = foldKey(key)
	}
	if f.set != nil {
		if _, ok := f.set[string(key)]; ok {
			return true
		}
		f.set[string(key)] = struct{}{}
		return false
	}
	for _, k := range f.keys {
		if bytes.Equal(k, key) {
			return true
		}
	}
	f.keys = append(f.keys, key)
	if len(f.keys) > maxLinearKeys {
		f.set = make(map[string]struct{}, 2*len(f.keys))
		for _, k := range f.keys {
			f.set[string(k)] = struct{}{}
		}
	}
	return false
}

// duplicateKey returns the wire path of the first repeated object key in body ("mesh",
// "tensors.a.shape", "ops[2].attrs.x") and true, or false when every object's keys are
// distinct. Keys are compared after unescaping ("m\u0065sh" repeats "mesh"), and
// case-sensitively (tensor ids are case-sensitive). body should be valid JSON (decode it
// first); on invalid input the answer is unspecified but the scan never panics. Time is
// linear in len(body).
func duplicateKey(body []byte) (string, bool) {
	return scanKeys(body, func(stack []dupFrame) bool {
		top := &stack[len(stack)-1]
		return top.seen(top.key)
	})
}

// keyNesting returns the wire path of the first place where more than limit objects on
// one path hold key name (e.g. "ops" inside while bodies inside while bodies) and true,
// or false when there is none. Same contract and cost as duplicateKey.
func keyNesting(body []byte, name string, limit int) (string, bool) {
	return scanKeys(body, func(stack []dupFrame) bool {
		if string(stack[len(stack)-1].key) != name {
			return false
		}
		n := 0
		for i := range stack {
			if !stack[i].array && string(stack[i].key) == name {
				n++
			}
		}
		return n > limit
	})
}

// keyLevels records where the nesting of one key (objects on one path holding it)
// first reached each level, during duplicateKeyAndLevels' scan: keyNesting(body, name,
// limit) is then known without a scan of its own (a graph body's "ops").
type keyLevels struct {
	name   string
	first  []string // first[k-1] is the wire path where the nesting first reached k
	capped bool     // the nesting went past maxKeyLevels, which were not recorded
}

// maxKeyLevels bounds the levels keyLevels records (each costs a path).
const maxKeyLevels = 256

// observe notes a key event of lv.name with stack.
func (lv *keyLevels) observe(stack []dupFrame) {
	n := 0
	for i := range stack {
		if !stack[i].array && string(stack[i].key) == lv.name {
			n++
		}
	}
	// A key at level n follows one at every level below it on the same path, so n is
	// at most one past the levels seen.
	if n <= len(lv.first) {
		return
	}
	if n > maxKeyLevels {
		lv.capped = true
		return
	}
	lv.first = append(lv.first, dupPath(stack))
}

// nesting is keyNesting(body, lv.name, limit) for the body lv was recorded on; known is
// false when the levels recorded cannot tell.
func (lv *keyLevels) nesting(limit int) (path string, deep, known bool) {
	if limit < len(lv.first) {
		return lv.first[limit], true, true
	}
	return "", false, !lv.capped
}

// duplicateKeyAndLevels is duplicateKey, recording lv's levels in the same scan (up to
// the duplicate, if any).
func duplicateKeyAndLevels(body []byte, lv *keyLevels) (string, bool) {
	return scanKeys(body, func(stack []dupFrame) bool {
		top := &stack[len(stack)-1]
		if string(top.key) == lv.name {
			lv.observe(stack)
		}
		return top.seen(top.key)
	})
}

// scanKeys walks body's bytes once, calling onKey each time an object key is read (the
// key is the top frame's key); when onKey returns true it stops and returns the wire
// path of the stack there.
func scanKeys(body []byte, onKey func(stack []dupFrame) bool) (string, bool) {
	var stack []dupFrame
	expectKey := false // the next string is an object key
	startValue := func() {
		if n := len(stack); n > 0 && stack[n-1].array {
			stack[n-1].idx++
		}
	}
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '{', '[':
			startValue()
			f := dupFrame{array: c == '[', idx: -1}
			if n := len(stack); n > 0 {
				parent := &stack[n-1]
				key := string(parent.key)
				if parent.array {
					key = ""
				}
				f.exactTree = parent.exactTree || exactTrees[key]
				f.exact = f.exactTree || key == "tensors"
			}
			// Reuse a popped frame's key slice: one allocation per depth, not per object.
			if n := len(stack); n < cap(stack) {
				stack = stack[:n+1]
				f.keys = stack[n].keys[:0]
				stack[n] = f
			} else {
				stack = append(stack, f)
			}
			expectKey = c == '{'
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			expectKey = len(stack) > 0 && !stack[len(stack)-1].array
		case ':':
			expectKey = false
		case '"':
			end, escaped := scanString(body, i+1)
			if end >= len(body) {
				return "", false // unterminated: not JSON
			}
			raw := body[i+1 : end]
			i = end
			if !expectKey || len(stack) == 0 {
				startValue()
				continue
			}
			key := raw
			if escaped {
				var s string
				if err := json.Unmarshal(body[i-len(raw)-1:i+1], &s); err == nil {
					key = []byte(s)
				}
			}
			stack[len(stack)-1].key = key
			expectKey = false
			if onKey(stack) {
				return dupPath(stack), true
			}
		default:
			// Numbers, literals and whitespace: a scalar starts a value only at its first
			// byte, and array indices only count values, so count at the start.
			if c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n' {
				startValue()
				for i+1 < len(body) && !isDelim(body[i+1]) {
					i++
				}
			}
		}
	}
	return "", false
}

// scanString returns the offset of the closing quote of the string whose contents start
// at i (len(body) when unterminated) and whether it holds escapes.
func scanString(body []byte, i int) (end int, escaped bool) {
	for ; i < len(body); i++ {
		switch body[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i, escaped
		}
	}
	return len(body), escaped
}

func isDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
		return true
	}
	return false
}

// dupPath renders the stack as a wire path ending at the repeated key.
func dupPath(stack []dupFrame) string {
	var b strings.Builder
	for _, f := range stack {
		if f.array {
			b.WriteString("[" + strconv.Itoa(f.idx) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(f.key)
	}
	return b.String()
}

// exactTrees are the members under which every object's keys are data or are matched
// exactly by their own reader (cost models), never case-folded.
var exactTrees = map[string]bool{"attrs": true, "cost_model": true}

// foldKey folds key as encoding/json matches field names (bytes.EqualFold: each rune to
// the least of its simple case folding orbit), so two keys fold alike exactly when they
// name the same field.
func foldKey(key []byte) []byte {
	ascii, lower := true, false
	for _, c := range key {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		lower = lower || 'a' <= c && c <= 'z'
	}
	switch {
	case ascii && !lower:
		return key
	case ascii:
		return bytes.ToUpper(key) // the least of an ASCII letter's orbit is its upper case
	}
	out := make([]byte, 0, len(key))
	for _, r := range string(key) {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		out = utf8.AppendRune(out, least)
	}
	return out
}
