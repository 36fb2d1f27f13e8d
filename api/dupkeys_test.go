package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDuplicateKey(t *testing.T) {
	tests := []struct {
		name string
		body string
		path string // "" means: no duplicate
	}{
		{"none", `{"mesh":"x=2","shape":[4]}`, ""},
		{"top level", `{"mesh":"x=2","shape":[4],"mesh":"x=4"}`, "mesh"},
		{"escaped twin", `{"mesh":"x=2","m\u0065sh":"x=4"}`, "mesh"},
		{"case differs: one field to encoding/json", `{"mesh":"x=2","MESH":"x=4"}`, "MESH"},
		{"case differs, nested field", `{"policy":{"forbid_full_rematerialization":true,"Forbid_Full_Rematerialization":false}}`, "policy.Forbid_Full_Rematerialization"},
		{"kelvin sign folds to k", "{\"k\":1,\"\u212a\":2}", "\u212a"},
		{"tensor ids differ in case", `{"tensors":{"x":{"shape":[1]},"X":{"shape":[2]}}}`, ""},
		{"a tensor's fields fold", `{"tensors":{"x":{"shape":[1],"Shape":[2]}}}`, "tensors.x.Shape"},
		{"attribute names differ in case", `{"ops":[{"attrs":{"a":1,"A":{"b":1,"B":2}}}]}`, ""},
		{"cost model axis links differ in case", `{"cost_model":{"axis_links":{"x":"ib","X":"ib"}}}`, ""},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2}}`, ""},
		{"same key at two depths", `{"k":{"k":{"k":1}}}`, ""},
		{"nested object", `{"mesh":{"name":"m","axes":[{"name":"x","size":2,"size":4}]}}`, "mesh.axes[0].size"},
		{"array index counts scalars", `{"ops":[1,"s",true,null,-2.5e3,{"a":1,"a":2}]}`, "ops[5].a"},
		{"array index counts containers", `{"x":[[],{},[1],{"q":{"r":1,"r":2}}]}`, "x[3].q.r"},
		{"key text inside a value string", `{"a":"\"a\":1","b":"{\"a\":2}"}`, ""},
		{"escaped quote in a key", `{"a\"b":1,"a\"b":2}`, `a"b`},
		{"many keys switch to a set", `{` + manyKeys(40) + `,"k7":0}`, "k7"},
		{"tensor ids", `{"tensors":{"x":{"shape":[1]},"y":{"shape":[2]},"x":{"shape":[3]}}}`, "tensors.x"},
		{"whitespace", "{ \"a\" : 1 ,\n \"a\" : 2 }", "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tc.body)), "test body must be valid JSON")
			path, dup := duplicateKey([]byte(tc.body))
			assert.Equal(t, tc.path != "", dup)
			assert.Equal(t, tc.path, path)
		})
	}
}

func manyKeys(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, `"k`+itoa(i)+`":`+itoa(i))
	}
	return strings.Join(parts, ",")
}

// TestDuplicateKeyAnswers400 checks every body-reading endpoint refuses a repeated key
// with a 400 naming it, including when the values agree.
func TestDuplicateKeyAnswers400(t *testing.T) {
	s := newTestServer(t, nil)
	tests := []struct {
		name, path, body, field string
	}{
		{"tiles mesh twice", "/v1/tiles", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[0]],"mesh":"x=2"}`, "mesh"},
		{"reshard mesh in two cases", "/v1/reshard", `{"mesh":"x=2","MESH":"x=4","shape":[4],"dtype":"f32","source":[["x"]],"target":[null]}`, "MESH"},
		{"graph mesh in two cases", "/v1/graph", `{"mesh":"x=2","Mesh":"x=4","tensors":{"a":{"shape":[4]}},"ops":[]}`, "Mesh"},
		{"reshard mesh twice", "/v1/reshard", `{"mesh":"x=2","shape":[4],"dtype":"f32","source":[["x"]],"target":[null],"mesh":"x=4"}`, "mesh"},
		{"reshard nested", "/v1/reshard", `{"mesh":{"axes":[{"name":"x","size":2,"name":"y"}]},"shape":[4],"dtype":"f32","source":[["x"]],"target":[null]}`, "mesh.axes[0].name"},
		{"graph tensor twice", "/v1/graph", `{"mesh":"x=2","tensors":{"a":{"shape":[4]},"a":{"shape":[8]}},"ops":[]}`, "tensors.a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, tc.path, "application/json", tc.body)
			p := requireProblem(t, rec, http.StatusBadRequest, slugInvalidJSON)
			assert.Equal(t, []string{tc.field}, fields(p), "detail: %s", p.Detail)
			assert.Contains(t, p.Errors[0].Message, "more than once")
		})
	}
}

// refDuplicateKey is the definition duplicateKey must agree with: a walk over
// encoding/json's tokens with a set of keys per open object.
func refDuplicateKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		obj       bool
		keys      []string
		key       string // the current key
		expectKey bool
		// exact: keys are data (tensor ids; anything under attrs or cost_model) and
		// compare exactly; other objects' keys compare as encoding/json matches fields.
		exact, exactTree bool
	}
	var stack []frame
	afterValue := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].expectKey = true
		}
	}
	push := func(f frame) {
		if n := len(stack); n > 0 {
			pk := ""
			if stack[n-1].obj {
				pk = stack[n-1].key
			}
			f.exactTree = stack[n-1].exactTree || pk == "attrs" || pk == "cost_model"
			f.exact = f.exactTree || pk == "tensors"
		}
		stack = append(stack, f)
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				push(frame{obj: true, expectKey: true})
			case '[':
				push(frame{})
			default:
				stack = stack[:len(stack)-1]
				afterValue()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].expectKey {
				top := &stack[n-1]
				for _, k := range top.keys {
					if k == t || !top.exact && strings.EqualFold(k, t) {
						return t, true
					}
				}
				top.keys = append(top.keys, t)
				top.key = t
				top.expectKey = false
				continue
			}
			afterValue()
		default:
			afterValue()
		}
	}
}

// FuzzDuplicateKey: on valid JSON the scan agrees with the token walk (found or not, and
// the repeated key ends its path); on any input it does not panic.
func FuzzDuplicateKey(f *testing.F) {
	for _, seed := range []string{
		`{"mesh":"x=2","mesh":"x=4"}`,
		`{"a":[1,{"b":2,"b":3}]}`,
		`{"a\u0062":1,"ab":2}`,
		`{"a":"\\","b":{"c":[true,false,null]}}`,
		`[{"x":1},{"x":1}]`,
		`{"a":{"a":{}}}`,
		`{"unterminated`,
	} {
		f.Add(seed)
	}
	addExamples(f, "graph-")
	f.Fuzz(func(t *testing.T, body string) {
		_, _ = keyNesting([]byte(body), "ops", 2) // never panics either
		path, dup := duplicateKey([]byte(body))
		if !json.Valid([]byte(body)) {
			return
		}
		key, want := refDuplicateKey([]byte(body))
		if dup != want {
			t.Fatalf("duplicateKey(%q) = %q, %v; the token walk says %v (%q)", body, path, dup, want, key)
		}
		if dup && !strings.HasSuffix(path, key) {
			t.Fatalf("duplicateKey(%q) path %q does not end at the repeated key %q", body, path, key)
		}
	})
}
