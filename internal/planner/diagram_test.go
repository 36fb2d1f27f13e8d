package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "diagrams", name+".txt")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test -update")
	assert.Equal(t, string(want), got)
}

// The mesh-contents pictures of seed 000 (with ERRATA's corrections), one golden each.
func TestSeedDiagrams(t *testing.T) {
	cases := []struct {
		name, mesh string
		shape      []int64
		src, tgt   string
		contains   []string // rows of the seed's target picture
	}{
		{"4x6_on_2x3_gather_minor", "a=2,b=3", []int64{4, 6}, `[[],[0,1]]`, `[[],[0]]`, []string{"| 11 12 13 | 11 12 13 |", "| 14 15 16 | 14 15 16 |"}},
		{"4x8_on_2x2x2", "a=2,b=2,c=2", []int64{4, 8}, `[[0],[1,2]]`, `[[0],[2]]`, []string{"| 11 12 13 14 | 15 16 17 18 |"}},
		{"6x6_on_2x3_transpose", "a=2,b=3", []int64{6, 6}, `[[0],[1]]`, `[[1],[0]]`, []string{"| 11 12 13 | 31 32 33 | 51 52 53 |", "| 14 15 16 | 34 35 36 | 54 55 56 |"}},
		{"6x6_on_2x6_transpose", "a=2,b=6", []int64{6, 6}, `[[0],[1]]`, `[[1],[0]]`, []string{"| 11 12 13 | 21 22 23 | 31 32 33 |", "| 14 15 16 | 24 25 26 | 34 35 36 |"}},
		{"6x6_on_3_all_to_all", "a=3", []int64{6, 6}, `[[0],[]]`, `[[],[0]]`, []string{"| 11 12 | 13 14 | 15 16 |"}},
		{"4x4_on_2x2x2", "a=2,b=2,c=2", []int64{4, 4}, `[[0],[1,2]]`, `[[0,1],[2]]`, []string{"| 11 12 | 13 14 |"}},
		{"003_case1_ranges", "X=2,Y=4", []int64{2048, 2048}, `["X",null]`, `["Y","X"]`, []string{"[0:512, 0:1024]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(t, tc.mesh, tc.shape, 8, tc.src, tc.tgt)
			d := Diagram(p)
			final := MeshPicture(p.Request.Mesh, p.Request.Shape, p.Request.Target)
			assert.True(t, strings.HasSuffix(d, final), "the diagram ends with the target picture")
			for _, c := range tc.contains {
				assert.Contains(t, final, c)
			}
			golden(t, tc.name, d)
		})
	}
}
