package api

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/testgen"
)

// getSchedule fetches plan id's schedule (of rank when rank >= 0).
func getSchedule(t *testing.T, h http.Handler, id, query string) ScheduleAnswer {
	t.Helper()
	rec := do(t, h, http.MethodGet, "/v1/plans/"+id+"/schedule"+query, "", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var a ScheduleAnswer
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a))
	return a
}

// TestScheduleByPlanID: a reshard asked with include "schedule" carries every rank's
// schedule (as runs on a regular mesh); GET /v1/plans/{id}/schedule?rank=N serves each
// rank's list, the same as the run it belongs to expands to, and its first and last
// tiles are the rank's source and target tiles.
func TestScheduleByPlanID(t *testing.T) {
	memo := &lookupMemo{fakeMemo: fakeMemo{store: map[string][]byte{}}}
	s := newTestServer(t, func(d *Deps) { d.Memo = memo })
	cases := []struct {
		name, body string
		runs       bool
	}{
		{"all_gather", `{"mesh": "x=4,y=4", "shape": [64, 64], "dtype": "f32", "source": ["x", "y"], "target": ["x", null], "include": ["schedule", "tiles"]}`, true},
		{"partial sums", `{"mesh": "x=2,y=2", "shape": [6, 5], "dtype": "bf16", "source": {"dims": [{"axes": ["x"]}, {"axes": []}], "unreduced": ["y"]}, "target": ["y", "x"], "include": ["schedule", "tiles"]}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := postReshard(t, s, c.body)
			require.NotNil(t, r.Schedule)
			sc := r.Schedule
			assert.Equal(t, "reshard", sc.Kind)
			assert.Equal(t, len(r.Steps), sc.Phases)
			if c.runs {
				assert.NotEmpty(t, sc.RankRuns, "a regular mesh's schedule compresses")
				assert.Less(t, len(sc.RankRuns), len(r.Tiles.Source))
			}
			all := getSchedule(t, s, r.PlanID, "")
			assert.Equal(t, *sc, all.Schedule)
			for _, tile := range r.Tiles.Target {
				one := getSchedule(t, s, r.PlanID, "?rank="+itoa(tile.Device))
				require.Len(t, one.Schedule.Ranks, 1)
				rk := one.Schedule.Ranks[0]
				require.Equal(t, int64(tile.Device), rk.Rank)
				require.Len(t, rk.Phases, len(r.Steps))
				assert.Equal(t, r.Tiles.Source[tile.Device].Ranges, rk.Buffers[0].Global, "rank %d starts with its source tile", tile.Device)
				assert.Equal(t, tile.Ranges, rk.Phases[len(rk.Phases)-1].Tile, "rank %d ends with its target tile", tile.Device)
				for k, ph := range rk.Phases {
					assert.Equal(t, r.Steps[k].Op, ph.Collective)
				}
			}
		})
	}
	rec := do(t, s, http.MethodGet, "/v1/plans/"+zeroID+"/schedule?rank=x", "", "")
	requireProblem(t, rec, http.StatusBadRequest, slugInvalidRequest)
	rec = do(t, s, http.MethodGet, "/v1/plans/"+zeroID+"/schedule", "", "")
	requireProblem(t, rec, http.StatusNotFound, slugNotFound)
	plain := postReshard(t, s, `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["x"], "target": [null]}`)
	rec = do(t, s, http.MethodGet, "/v1/plans/"+plain.PlanID+"/schedule", "", "")
	p := requireProblem(t, rec, http.StatusNotFound, slugNotFound)
	assert.Contains(t, p.Detail, `"schedule" in include`)
}

const zeroID = "0000000000000000000000000000000000000000000000000000000000000000"

// TestRankRunsExpand: runs expand to exactly the ranks they stand for, on schedules of
// every shape the reshard random set gives on its 256-device mesh.
func TestRankRunsExpand(t *testing.T) {
	s := newTestServer(t, nil)
	for i, body := range testgen.RandomSetBodies(randomSetMesh(t))[:3] {
		var req map[string]any
		require.NoError(t, json.Unmarshal(body, &req))
		req["include"] = []string{"schedule"}
		b, _ := json.Marshal(req)
		r := postReshard(t, s, string(b))
		require.NotNil(t, r.Schedule, "%d", i)
		ranks := r.Schedule.Ranks
		if ranks == nil {
			for k := range r.Schedule.RankRuns {
				run := &r.Schedule.RankRuns[k]
				for j := range run.Count {
					ranks = append(ranks, run.expand(j))
				}
			}
			slices.SortFunc(ranks, func(a, b ScheduleRank) int { return cmp.Compare(a.Rank, b.Rank) })
		}
		require.Len(t, ranks, 256, "%d", i)
		for id := range 256 {
			rk, ok := r.Schedule.rank(int64(id))
			require.True(t, ok)
			require.Equal(t, int64(id), rk.Rank)
			require.Equal(t, ranks[id], rk)
		}
		// The runs of the explicit ranks give each of them back once.
		runs, err := rankRuns(ranks)
		require.NoError(t, err)
		seen := map[int64]bool{}
		for _, run := range runs {
			for j := range run.Count {
				rk := run.expand(j)
				require.False(t, seen[rk.Rank], "%d: rank %d twice", i, rk.Rank)
				seen[rk.Rank] = true
				require.Equal(t, ranks[rk.Rank], rk, "%d: rank %d", i, rk.Rank)
			}
		}
		require.Len(t, seen, len(ranks))
		t.Logf("%d: %d ranks, %d runs, %d ops", i, len(ranks), len(runs), r.Schedule.Ops)
	}
}

// TestTransferSchedule: a transfer asked with include "schedule" carries a plan id and
// every rank's schedule, which GET /v1/plans/{id}/schedule?rank=N serves.
func TestTransferSchedule(t *testing.T) {
	memo := &lookupMemo{fakeMemo: fakeMemo{store: map[string][]byte{}}}
	s := newTestServer(t, func(d *Deps) { d.Memo = memo })
	src := testgen.At("trainer", "fsdp=2,tp=2", 0)
	body := testgen.TransferRequestJSON("h100", 16, src, testgen.Replicas("tp=2", 2, 2, 8), testgen.Llama{Layers: 2, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, Vocab: 256}.Tensors())
	var req map[string]any
	require.NoError(t, json.Unmarshal(body, &req))
	req["include"] = []string{"schedule"}
	body, _ = json.Marshal(req)
	rec := postTransfer(t, s, body, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var resp TransferResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	require.NotNil(t, resp.Schedule)
	require.Len(t, resp.PlanID, 64)
	assert.Equal(t, "transfer", resp.Schedule.Kind)
	assert.Equal(t, resp.Summary.Tensors, len(resp.Schedule.Tensors))
	one := getSchedule(t, s, resp.PlanID, "?rank=9")
	require.Len(t, one.Schedule.Ranks, 1)
	assert.Equal(t, int64(9), one.Schedule.Ranks[0].Rank)
	recvs := 0
	for _, ph := range one.Schedule.Ranks[0].Phases {
		for _, op := range ph.Ops {
			if op.Op == "recv" {
				recvs++
			}
		}
	}
	assert.Positive(t, recvs, "a target rank receives")
}

func randomSetMesh(t *testing.T) *sharding.Mesh {
	m, err := sharding.ParseMeshString(testgen.RandomSetMesh, "mesh")
	require.NoError(t, err)
	return m
}
