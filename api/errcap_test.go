package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TestManyErrorsListedBounded posts bodies with thousands of bad values: the 400 lists
// the first maxListedErrors and counts the rest, and a sharding listing far more axes
// than the mesh has is one error, not one per axis (500 KB of them made a 31 MB answer
// on tiles and a 1.4 GB one on a graph of 40 such tensors).
func TestManyErrorsListedBounded(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxBodyBytes = 32 << 20 })
	axes := strings.TrimSuffix(strings.Repeat(`"x",`, 100000), ",")
	var bad []string
	for i := range 40 {
		bad = append(bad, fmt.Sprintf(`"b%d":{"shape":[4],"dtype":"f32","sharding":[[%s]]}`, i, axes))
	}
	var unknown []string
	for i := range 3000 {
		unknown = append(unknown, fmt.Sprintf(`"u%d":{"shape":[4],"dtype":"f32","sharding":[["nope"]]}`, i))
	}
	tests := []struct {
		name, path, body string
		errors, more     int
	}{
		{"tiles, 100,000 axes", "/v1/tiles", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[` + axes + `]]}`, 1, 0},
		{"graph, 40 tensors of 100,000 axes", "/v1/graph", `{"mesh":"x=2","tensors":{` + strings.Join(bad, ",") + `},"ops":[]}`, 40, 0},
		{"graph, 3,000 unknown axes", "/v1/graph", `{"mesh":"x=2","tensors":{` + strings.Join(unknown, ",") + `},"ops":[]}`, maxListedErrors, 3000 - maxListedErrors},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, tc.path, "application/json", tc.body)
			require.Equal(t, http.StatusBadRequest, rec.Code)
			p := requireProblem(t, rec, http.StatusBadRequest, slugInvalidSharding)
			assert.Len(t, p.Errors, tc.errors)
			assert.Less(t, rec.Body.Len(), 64<<10, "the answer is bounded")
			if tc.more > 0 {
				assert.Contains(t, rec.Body.String(), fmt.Sprintf(`"more_errors":%d`, tc.more))
				assert.True(t, strings.HasSuffix(p.Detail, fmt.Sprintf("and %d more errors (the first %d are listed; fix them and send the request again)", tc.more, maxListedErrors)), p.Detail[max(0, len(p.Detail)-200):])
			} else {
				assert.NotContains(t, rec.Body.String(), "more_errors")
			}
		})
	}
}

func TestInvalidCutsLongErrors(t *testing.T) {
	long := strings.Repeat("é", maxErrorText) // 2 bytes a rune: the cut falls inside one
	p := Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf(long, "%s", long))
	require.Len(t, p.Errors, 1)
	for _, s := range []string{p.Errors[0].Field, p.Errors[0].Message} {
		assert.LessOrEqual(t, len(s), maxErrorText+len("…"))
		assert.True(t, strings.HasSuffix(s, "é…"), "cut at a rune boundary")
	}
}
