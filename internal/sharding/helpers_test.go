package sharding

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mustMesh parses the "x=2,y=4" form or fails the test.
func mustMesh(t testing.TB, s string) *Mesh {
	t.Helper()
	m, err := ParseMeshString(s, "mesh")
	require.NoError(t, err, "mesh %q", s)
	return m
}

// mustParse parses raw JSON (any of the three forms) or fails the test.
func mustParse(t testing.TB, raw string, m *Mesh, shape []int64) Sharding {
	t.Helper()
	s, err := Parse(json.RawMessage(raw), m, shape, "source")
	require.NoError(t, err, "parse %s", raw)
	return s
}

// jsonString quotes s as a JSON string (the Shardy text form on the wire).
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// requireFieldError asserts that err is made of field errors and that one of them has
// exactly the given field and a message containing every one of want.
func requireFieldError(t *testing.T, err error, field string, want ...string) {
	t.Helper()
	require.Error(t, err)
	es, ok := AsFieldErrors(err)
	require.True(t, ok, "error %v (%T) carries no field error", err, err)
	for _, e := range es {
		if e.Field != field {
			continue
		}
		all := true
		for _, w := range want {
			all = all && strings.Contains(e.Message, w)
		}
		if all {
			return
		}
	}
	t.Fatalf("no field error on %q containing %q; got %v", field, want, es)
}

// requireOnlyFieldErrors asserts err is a non-empty list of field errors, each with a
// field under root and a message.
func requireOnlyFieldErrors(t testing.TB, err error, root string) {
	t.Helper()
	es, ok := AsFieldErrors(err)
	require.True(t, ok, "error %v (%T) is not a field error", err, err)
	require.NotEmpty(t, es)
	for _, e := range es {
		require.True(t, e.Field == root || strings.HasPrefix(e.Field, root+".") || strings.HasPrefix(e.Field, root+"["),
			"field %q not under %q", e.Field, root)
		require.NotEmpty(t, e.Message)
	}
}

// requireShardy asserts got equals want, a sharding in Shardy's text form.
func requireShardy(t *testing.T, got Sharding, m *Mesh, shape []int64, want string) {
	t.Helper()
	w, err := ParseText(want, m, shape, "want")
	require.NoError(t, err)
	require.True(t, got.Equal(w), "got %s want %s", got, w)
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
