package sharding

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTextAfterNULRejected checks that every text form refuses what follows a NUL byte
// (the parsers took a NUL for the end of the text and accepted anything after it).
func TestTextAfterNULRejected(t *testing.T) {
	m, err := ParseMeshString("x=2", "mesh")
	require.NoError(t, err)
	for _, text := range []string{
		"[{\"x\"}]\x00garbage",
		"sharding<@mesh, [{\"x\"}]>\x00garbage",
		"P('x')\x00zz",
		"{devices=[2]0,1}\x00zz",
		"[{\"x\"}]\x00",
	} {
		_, err := ParseString(text, m, []int64{4}, "sharding")
		require.Error(t, err, "%q", text)
		fes, ok := AsFieldErrors(err)
		require.True(t, ok)
		assert.Contains(t, fes[0].Message, `\x00`, "%q", text)
	}
	_, err = ParseString("[{\"x\"}] \n", m, []int64{4}, "sharding")
	assert.NoError(t, err, "trailing whitespace is still fine")
}

func TestArrayLen(t *testing.T) {
	for raw, want := range map[string]int{
		`[]`: 0, ` [ ] `: 0, `["x"]`: 1, `["x", "y"]`: 2, `[["a","b"],{"c":[1,2]},"d,e"]`: 3,
		`["\"],[", "y"]`: 2, `null`: 0, `"x"`: 0, `[1,2,3`: 2,
	} {
		assert.Equal(t, want, arrayLen([]byte(raw)), raw)
	}
}
