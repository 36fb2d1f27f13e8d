package sharding

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// formsCorpus is one sharding per case: mesh (and device_ids), the tensor shape, and the
// sharding in Shardy's form. The golden file adds how the service prints
// it (text, hlo, partition_spec), and every printed form must read back to the same
// tiles.
var formsCorpus = []struct {
	mesh   string
	ids    []int
	shape  []int64
	shardy string
}{
	{"X=2,Y=4", nil, []int64{2048, 2048}, `[{"X"}, {}]`},
	{"X=2,Y=4", nil, []int64{2048, 2048}, `[{"Y"}, {"X"}]`},
	{"X=2,Y=4", nil, []int64{2048, 2048}, `[{"Y":(1)2}, {"X", "Y":(2)2}]`},
	{"X=2,Y=4", nil, []int64{2048, 2048}, `[{"X"}, {}], unreduced={"Y"}`},
	{"X=2,Y=4", nil, []int64{2048, 2048}, `[{}, {}], unreduced={"X", "Y"}`},
	{"X=2,Y=4", nil, []int64{2048, 2048}, `[{"Y":(2)2, "X"}, {?}p0], replicated={"Y":(1)2}`},
	{"C=1,D=2,Y=8,X=4,T=4", nil, []int64{2048, 2048}, `[{"D"}, {"X", "Y"}]`},
	{"C=1,D=2,Y=8,X=4,T=4", nil, []int64{2048, 2048}, `[{}, {"X", "T"}]`},
	{"C=1,D=2,Y=8,X=4,T=4", nil, []int64{2048, 2048}, `[{}, {"D", "Y", "X", "T"}]`},
	{"C=1,D=2,Y=8,X=4,T=4", nil, []int64{2048, 128}, `[{"T", "D"}, {"Y":(2)4}], unreduced={"X":(1)2}`},
	{"data=4,model=2", nil, []int64{6, 10}, `[{"model"}, {"data":(2)2, "data":(1)2}]`},
	{"a=3,b=4", nil, []int64{16, 23}, `[{"b":(2)2, "a"}, {"b":(1)2}]`},
	{"x=2,y=2", []int{3, 2, 1, 0}, []int64{4, 4}, `[{"x"}, {}]`},
	{"x=2,y=2", []int{3, 2, 1, 0}, []int64{4, 4}, `[{"y"}, {"x"}]`},
	{"x=2,y=2", []int{0, 2, 1, 3}, []int64{4, 4}, `[{}, {"x"}], unreduced={"y"}`},
}

func TestFormsGolden(t *testing.T) {
	var b strings.Builder
	b.WriteString("# mesh [device_ids] | shape | Shardy text | hlo | partition_spec (generated: go test ./internal/sharding -run TestFormsGolden -update)\n")
	for _, c := range formsCorpus {
		m0 := mustMesh(t, c.mesh)
		m, err := NewMesh("mesh", m0.Axes, c.ids)
		require.NoError(t, err)
		s, err := ParseText(c.shardy, m, c.shape, "s")
		require.NoError(t, err, c.shardy)
		hlo := s.HLO(m)
		ps, ok := s.PartitionSpecText()
		if !ok {
			ps = "-"
		}
		ids := ""
		if m.DeviceIDs != nil {
			ids = " " + strings.Join(strings.Fields(strings.Trim(fmtInts(m.DeviceIDs), "[]")), ",")
		}
		b.WriteString(c.mesh + ids + " | " + fmtInts64(c.shape) + " | " + s.Text(m.Name) + " | " + hlo + " | " + ps + "\n")

		// Each printed form reads back to the same tiles (and partial sums).
		want := NewLayout(m, c.shape, s).Tiles(nil)
		forms := []string{s.Text(m.Name), hlo}
		if ok {
			forms = append(forms, ps)
		}
		for _, f := range forms {
			got, err := ParseString(f, m, c.shape, "s")
			require.NoError(t, err, "%s: %s", c.shardy, f)
			assert.Equal(t, want, NewLayout(m, c.shape, got).Tiles(nil), "%s: %s", c.shardy, f)
			assert.True(t, slices.Equal(s.Unreduced, got.Unreduced), "%s: %s -> %s", c.shardy, f, got)
		}
	}
	path := filepath.Join("testdata", "forms.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	golden, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	assert.Equal(t, string(golden), b.String())
}

func fmtInts(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = itoa(x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtInts64(v []int64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = itoa(int(x))
	}
	return "[" + strings.Join(parts, ",") + "]"
}
