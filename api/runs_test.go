package api

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultRunsExpandToTheLists is the oracle of the compact default answer: on random
// meshes and shardings, every step's runs expand to exactly the lists include ["pairs"]
// answers (as multisets), and a step written as runs is shorter that way.
func TestDefaultRunsExpandToTheLists(t *testing.T) {
	s := newTestServer(t, nil)
	rng := rand.New(rand.NewPCG(31, 6))
	runs := 0
	for i := range 40 {
		nAxes := 2 + rng.IntN(3)
		axes := make([]string, nAxes)
		var mesh []string
		for a := range axes {
			axes[a] = fmt.Sprintf("a%d", a)
			mesh = append(mesh, fmt.Sprintf("%s=%d", axes[a], []int{2, 4}[rng.IntN(2)]))
		}
		spec := func() string {
			dims := [2][]string{}
			for _, a := range rng.Perm(nAxes) {
				if d := rng.IntN(3); d < 2 {
					dims[d] = append(dims[d], `"`+axes[a]+`"`)
				}
			}
			return fmt.Sprintf("[[%s],[%s]]", strings.Join(dims[0], ","), strings.Join(dims[1], ","))
		}
		ops := []string{`["all_to_all_v"]`, `["collective_permute","slice","all_gather"]`}[i%2]
		body := fmt.Sprintf(`{"mesh":%q,"shape":[96,160],"dtype":"f32","source":%s,"target":%s,"allowed_ops":%s%%s}`,
			strings.Join(mesh, ","), spec(), spec(), ops)
		rec := do(t, s, http.MethodPost, "/v1/reshard", "application/json", fmt.Sprintf(body, ""))
		if rec.Code != http.StatusOK {
			continue // no plan with these ops
		}
		var def, full ReshardResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &def))
		full = postReshard(t, s, fmt.Sprintf(body, `,"include":["pairs"]`))
		require.Len(t, full.Steps, len(def.Steps), body)
		for k, st := range def.Steps {
			want := full.Steps[k]
			assert.Empty(t, want.PairRuns, body)
			assert.Empty(t, want.TransferRuns, body)
			pairs := append([][2]int{}, st.Pairs...)
			for _, r := range st.PairRuns {
				pairs = append(pairs, r.Expand()...)
			}
			assert.ElementsMatch(t, want.Pairs, pairs, "%s step %d", body, k)
			assert.ElementsMatch(t, want.Transfers, stepTransfers(st), "%s step %d", body, k)
			if len(st.PairRuns)+len(st.TransferRuns) > 0 {
				runs++
				assert.Less(t, len(st.PairRuns)*5+len(st.TransferRuns)*2, len(want.Pairs)*2+len(want.Transfers), "%s step %d: runs only where shorter", body, k)
			}
		}
	}
	assert.Positive(t, runs, "some steps are written as runs")
}
