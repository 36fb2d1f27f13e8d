package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeyLevelsAgreeWithKeyNesting checks that the "ops" levels recorded by the duplicate
// scan answer keyNesting for every limit, on bodies nesting while regions in several
// shapes (nested, side by side, after a shallower branch, past maxKeyLevels).
func TestKeyLevelsAgreeWithKeyNesting(t *testing.T) {
	nest := func(depth int) string {
		s := `{"op":"negate"}`
		for range depth {
			s = `{"op":"while","cond":{"ops":[]},"body":{"ops":[` + s + `]}}`
		}
		return s
	}
	bodies := []string{
		`{"mesh":"x=2"}`,
		`{"ops":[]}`,
		`{"ops":[` + nest(1) + `]}`,
		`{"ops":[` + nest(3) + `,` + nest(5) + `]}`,
		`{"ops":[` + nest(4) + `],"tensors":{"ops":{"ops":{"ops":1}}}}`,
		`{"tensors":{"ops":{"shape":[]}},"ops":[` + nest(2) + `]}`,
		`{"ops":[` + nest(maxKeyLevels+3) + `]}`,
		`{"a":[{"ops":[{"ops":[]}]},{"ops":[{"x":{"ops":[]}}]}]}`,
	}
	for i, body := range bodies {
		lv := keyLevels{name: "ops"}
		_, dup := duplicateKeyAndLevels([]byte(body), &lv)
		require.False(t, dup, body)
		for limit := range maxKeyLevels + 8 {
			wantPath, wantDeep := keyNesting([]byte(body), "ops", limit)
			path, deep, known := lv.nesting(limit)
			if !known {
				require.Greater(t, limit, maxKeyLevels-1, "body %d limit %d", i, limit)
				continue
			}
			require.Equal(t, wantDeep, deep, "body %d limit %d", i, limit)
			require.Equal(t, wantPath, path, "body %d limit %d", i, limit)
		}
	}
}
