package api

import (
	"reflect"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// unknownFieldProblem is the 400 of a request key no field takes: an invalid request (the body
// is well-formed JSON), naming the key by its path and, when one is close, the field
// that was probably meant. root is the request type the path starts from (a struct or a
// pointer to one); nil suggests nothing.
func unknownFieldProblem(path, name string, root reflect.Type) *Problem {
	msg := "unknown field " + quote(name)
	if near := nearestField(name, jsonFieldsAt(root, path)); near != "" {
		msg += "; did you mean " + quote(near) + "?"
	}
	return Invalid(slugInvalidRequest, "Invalid request",
		sharding.Fieldf(path, "%s; see GET /openapi.json for the request's fields", msg))
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// jsonFieldsAt lists the JSON names of the fields of the object at path (the unknown
// key's own path: its parent is the object) in values of type t, nil when the path does
// not lead to a struct.
func jsonFieldsAt(t reflect.Type, path string) []string {
	if t == nil {
		return nil
	}
	parts := splitPath(path)
	if len(parts) == 0 {
		return nil
	}
	for _, part := range parts[:len(parts)-1] {
		t = elemType(t)
		if t.Kind() == reflect.Map {
			t = t.Elem() // part is a key of the map
			continue
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		f, ok := jsonField(t, part)
		if !ok {
			return nil
		}
		t = f.Type
	}
	t = elemType(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		if name := jsonName(t.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// splitPath splits a wire path ("options.effort", "tensors[2].sharding") into its keys;
// array indices are dropped (elemType steps into slices).
func splitPath(path string) []string {
	var parts []string
	for p := range strings.SplitSeq(path, ".") {
		if i := strings.IndexByte(p, '['); i >= 0 {
			p = p[:i]
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// elemType is t without pointers, slices and arrays.
func elemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	return t
}

// jsonField is the exported field of struct t whose JSON name is name (case-insensitive,
// as encoding/json matches).
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); strings.EqualFold(jsonName(f), name) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// jsonName is f's JSON name, "" when encoding/json leaves it out.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}

// nearestField is the known name closest to name by edit distance (case-insensitive),
// when it is close enough to be a typo of it (at most a third of its letters, at least
// one, at most three); "" otherwise.
func nearestField(name string, known []string) string {
	limit := min(max(len(name)/3, 1), 3)
	best, bestD := "", limit+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (optimal string alignment: an
// adjacent transposition is one edit) between a and b, by bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
