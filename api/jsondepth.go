package api

import (
	"net/http"
	"strconv"
	"strings"
)

// jsonTooDeep returns the wire path ("ops[0].body.ops[0]") of the first array or object
// of body that nests more than limit deep, and true; false when none does (limit <= 0:
// no limit). It runs before anything decodes the body, in one linear pass that skips
// strings and keeps one path element per open level, so a deeply nested body costs its
// length and no more. Malformed JSON is left to the decoder (the scan never panics).
func jsonTooDeep(body []byte, limit int) (string, bool) {
	if limit <= 0 {
		return "", false
	}
	type level struct {
		array bool
		idx   int    // array: index of the current element
		key   []byte // object: the current key, as written
	}
	var stack []level
	expectKey := false // the next string is an object key
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '"':
			start := i + 1
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
			if n := len(stack); n > 0 && expectKey {
				stack[n-1].key = body[start:min(i, len(body))]
				expectKey = false
			}
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].array {
					stack[n-1].idx++
				} else {
					expectKey = true
				}
			}
		case '{', '[':
			if len(stack) >= limit {
				return levelsPath(len(stack), func(k int) (bool, int, []byte) {
					return stack[k].array, stack[k].idx, stack[k].key
				}), true
			}
			stack = append(stack, level{array: c == '['})
			expectKey = c == '{'
		case '}', ']':
			if n := len(stack); n > 0 {
				stack = stack[:n-1]
			}
			expectKey = false
		}
	}
	return "", false
}

// levelsPath joins n open levels into a wire path: an object level by its key, an array
// level by its index. Keys are written as they appear (escapes kept).
func levelsPath(n int, at func(k int) (array bool, idx int, key []byte)) string {
	var b strings.Builder
	for k := range n {
		array, idx, key := at(k)
		if array {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(idx))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(key)
	}
	return b.String()
}

// isJSONBody reports whether r's body is JSON (application/json, any +json type, or no
// Content-Type): a raw module (application/mlir) is not.
func isJSONBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// tooDeep is the 400 of a JSON body whose value at path nests more than limit deep.
func tooDeep(path string, limit int) *Problem {
	return limitExceeded(path, "nests arrays and objects more than %d deep (SHARDPLAN_MAX_JSON_DEPTH); flatten the request", limit)
}
