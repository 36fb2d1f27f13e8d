package stablehlo

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolveLoc(t *testing.T) {
	m := &Module{LocAliases: map[string]string{
		"loc3": `"model.py":12:0`,
		"loc8": `"jit(f)/dot_general"(#loc3)`,
		"self": `#self`,
	}}
	cases := []struct {
		text string
		want Location
	}{
		{`unknown`, Location{}},
		{`"x"`, Location{Name: "x"}},
		{`"model.py":12:5`, Location{File: "model.py", Line: 12, Column: 5}},
		{`"model.py":12:5 to :9`, Location{File: "model.py", Line: 12, Column: 5}},
		{`#loc8`, Location{File: "model.py", Line: 12, Name: "jit(f)/dot_general"}},
		{`"jit(f)/add"("a \"q\".py":3:1)`, Location{File: `a "q".py`, Line: 3, Column: 1, Name: "jit(f)/add"}},
		{`callsite("inner"("lib.py":40:2) at callsite("outer"("model.py":7:0) at #loc3))`, Location{File: "lib.py", Line: 40, Column: 2, Name: "inner"}},
		{`fused<"x">["jit(f)/mul", "m.py":2:3]`, Location{File: "m.py", Line: 2, Column: 3, Name: "jit(f)/mul"}},
		{`#self`, Location{}},
		{`#missing`, Location{}},
		{`"unterminated`, Location{}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, m.ResolveLoc(tc.text), tc.text)
	}
}

// TestOpLocation reads the MLP example's locations through its #loc aliases.
func TestOpLocation(t *testing.T) {
	src, err := os.ReadFile("../../examples/graph-stablehlo-mlp.mlir")
	require.NoError(t, err)
	imp, err := Read(context.Background(), string(src), Options{})
	require.NoError(t, err)
	l, ok := imp.OpLocation("0")
	require.True(t, ok)
	assert.Equal(t, Location{File: "/tmp/mlp.py", Line: 12, Name: "jit(mlp)/jit(main)/dot_general"}, l)
	l, ok = imp.OpLocation("6")
	require.True(t, ok)
	assert.Equal(t, "jit(mlp)/jit(main)/add", l.Name)
	_, ok = imp.OpLocation("nope")
	assert.False(t, ok)
	assert.Equal(t, 12, imp.OpLine("6"))
}

// FuzzResolveLoc: any loc text (and alias table entry, which may refer to itself)
// resolves without panicking or looping, and a file location always has a file.
func FuzzResolveLoc(f *testing.F) {
	for _, s := range []string{`"x.py":1:2`, `"n"(#a)`, `callsite("a"("f":1:1) at #a)`, `fused<"m">["a", "f":2:3]`, `#a`, `unknown`, `"a\"b"("c":3:4 to :5)`} {
		f.Add(s, `#a`)
	}
	f.Fuzz(func(t *testing.T, text, alias string) {
		m := &Module{LocAliases: map[string]string{"a": alias}}
		l := m.ResolveLoc(text)
		if l.Line != 0 && l.File == "" {
			t.Fatalf("%q: a line without a file: %+v", text, l)
		}
	})
}
