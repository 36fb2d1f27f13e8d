package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/testgen"
)

// llama70B is the 70B model from FSDP=32 x TP=8 on devices 0..255 to 16 replicas of
// TP=8 on devices 256..383 (disjoint) or, colocated, 32 replicas on 0..255.
func llama70B(colocated bool) []byte {
	src := testgen.At("trainer", "fsdp=32,tp=8", 0)
	if colocated {
		return testgen.TransferRequestJSON("h100", 256, src, testgen.Replicas("tp=8", 32, 8, 0), testgen.Llama3_70B.Tensors())
	}
	return testgen.TransferRequestJSON("h100", 384, src, testgen.Replicas("tp=8", 16, 8, 256), testgen.Llama3_70B.Tensors())
}

func postTransfer(t testing.TB, s http.Handler, body []byte, accept string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/transfer", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

func TestTransferLlama70B(t *testing.T) {
	s := newTestServer(t, nil)
	cases := []bool{false, true}
	if raceBuild {
		cases = cases[:1] // the race detector makes each plan ten times slower
	}
	for _, colocated := range cases {
		rec := postTransfer(t, s, llama70B(colocated), "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var resp TransferResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
		sm := resp.Summary
		t.Logf("colocated=%v %s", colocated, TransferText(&resp))
		assert.GreaterOrEqual(t, sm.TimeUS, sm.TimeLowerBoundUS)
		assert.LessOrEqual(t, sm.TimeUS, 1.25*sm.TimeLowerBoundUS, "within 1.25x of the bound")
		assert.Less(t, rec.Body.Len(), 1<<20, "answer under 1 MB")
		assert.Equal(t, testgen.Llama3_70B.Params(), sm.TensorBytes/2, "Llama 3 70B's parameters in bf16")
		assert.Equal(t, int64(70553706496), testgen.Llama3_70B.Params())
	}
}

// smallTransfer is a 2-node h100 transfer: a trainer on node 0 (x=2,y=4), two
// replicas of tp=4 on node 1.
const smallTransfer = `{"cost_model": "h100", "fabric_devices": 16,
 "source": {"name": "trainer", "mesh": "x=2,y=4", "first_device": 0},
 "targets": [{"mesh": "tp=4", "device_ids": [8, 9, 10, 11]}, {"mesh": "tp=4", "first_device": 12}],
 "tensors": [{"name": "layers.{i}.w", "shape": [1024, 4096], "dtype": "bf16", "source": [["x", "y"], null], "target": [null, "tp"], "repeat": 4},
             {"name": "norm", "tensor": "bf16[4096]", "source": "P('y')", "target": [null]}]}`

func TestTransferBadInput(t *testing.T) {
	s := newTestServer(t, nil)
	edit := func(old, new string) string {
		require.Contains(t, smallTransfer, old)
		return strings.Replace(smallTransfer, old, new, 1)
	}
	cases := []struct {
		name, body string
		status     int
		slug       string
		field      string
	}{
		{"device in two replicas", edit(`"first_device": 12`, `"device_ids": [12, 13, 14, 8]`), 400, slugInvalidRequest, "targets[1].device_ids[3]"},
		{"id outside the fabric", edit(`"first_device": 12`, `"first_device": 14`), 400, slugInvalidRequest, "targets[1].device_ids[2]"},
		{"id twice in a placement", edit(`[8, 9, 10, 11]`, `[8, 9, 9, 11]`), 400, slugInvalidRequest, "targets[0].device_ids[2]"},
		{"ids and mesh size", edit(`[8, 9, 10, 11]`, `[8, 9, 10]`), 400, slugInvalidRequest, "targets[0].device_ids"},
		{"no ids", edit(`, "first_device": 0}`, `}`), 400, slugInvalidRequest, "source.device_ids"},
		{"replica meshes differ", edit(`{"mesh": "tp=4", "first_device": 12}`, `{"mesh": "tp=2,x=2", "first_device": 12}`), 400, slugInvalidMesh, "targets[1].mesh"},
		{"shape differs", edit(`"repeat": 4}`, `"repeat": 4, "target_shape": [4096, 1024]}`), 400, slugInvalidRequest, "tensors[0].target_shape"},
		{"bad target sharding", edit(`[null, "tp"]`, `[null, "q"]`), 400, slugInvalidSharding, "tensors[0].target[1]"},
		{"tpu model", edit(`"h100"`, `"tpu-v5p"`), 400, slugInvalidRequest, "cost_model"},
		{"over the device limit", edit(`"fabric_devices": 16`, `"fabric_devices": 100000`), 400, slugLimitExceeded, "fabric_devices"},
		{"unknown include", edit(`"cost_model"`, `"include": ["moves"], "cost_model"`), 400, slugInvalidRequest, "include[0]"},
		{"unknown strategy", edit(`"cost_model"`, `"strategy": "ring", "cost_model"`), 400, slugInvalidRequest, "strategy"},
		{"over the budget", edit(`"cost_model"`, `"memory_budget_bytes_per_device": 100000, "cost_model"`), 422, slugBudgetExceeded, "memory_budget_bytes_per_device"},
		// Sizes from the request alone, before anything is made of them.
		{"repeat 2^31", edit(`"repeat": 4`, `"repeat": 2147483648`), 400, slugLimitExceeded, "tensors[0].repeat"},
		{"repeat 2^63-1", edit(`"repeat": 4`, `"repeat": 9223372036854775807`), 400, slugLimitExceeded, "tensors[0].repeat"},
		{"repeat 2^24", edit(`"repeat": 4`, `"repeat": 16777216`), 400, slugLimitExceeded, "tensors[0].repeat"},
		{"repeat_j past the limit", edit(`"repeat": 4`, `"repeat": 4, "repeat_j": 16777216`), 400, slugLimitExceeded, "tensors[0].repeat_j"},
		{"repeats past the request's tensors", edit(`"repeat": 4`, `"repeat": 1024, "repeat_j": 1025`), 400, slugLimitExceeded, "tensors[0]"},
		{"names past the answer limit", edit(`"layers.{i}.w"`, `"`+strings.Repeat("{i}.", 200)+`w"`), 0, "", ""},
		{"repeat -1", edit(`"repeat": 4`, `"repeat": -1`), 400, slugInvalidRequest, "tensors[0].repeat"},
		{"repeat 0", edit(`"repeat": 4`, `"repeat": 0`), 400, slugInvalidRequest, "tensors[0].repeat"},
		{"repeat_j 0", edit(`"repeat": 4`, `"repeat": 4, "repeat_j": 0`), 400, slugInvalidRequest, "tensors[0].repeat_j"},
		{"element_bytes -1", edit(`"tensor": "bf16[4096]"`, `"shape": [4096], "element_bytes": -1`), 400, slugInvalidRequest, "tensors[1].element_bytes"},
		{"element_bytes 0", edit(`"tensor": "bf16[4096]"`, `"shape": [4096], "element_bytes": 0`), 400, slugInvalidRequest, "tensors[1].element_bytes"},
		{"element_bytes 17", edit(`"tensor": "bf16[4096]"`, `"shape": [4096], "element_bytes": 17`), 400, slugInvalidRequest, "tensors[1].element_bytes"},
		{"element_bytes 2^31", edit(`"tensor": "bf16[4096]"`, `"shape": [4096], "element_bytes": 2147483648`), 400, slugInvalidRequest, "tensors[1].element_bytes"},
		{"no name", edit(`"name": "norm", `, ``), 400, slugInvalidRequest, "tensors[1].name"},
		{"unknown placeholder", edit(`"layers.{i}.w"`, `"layers.{layer}.w"`), 400, slugInvalidRequest, "tensors[0].name"},
		{"{j} without repeat_j", edit(`"layers.{i}.w"`, `"layers.{i}.experts.{j}.w"`), 400, slugInvalidRequest, "tensors[0].name"},
		{"{i} without repeat", edit(`"norm"`, `"norm.{i}"`), 400, slugInvalidRequest, "tensors[1].name"},
		{"target without mesh", edit(`{"mesh": "tp=4", "first_device": 12}`, `{"first_device": 12}`), 400, slugInvalidRequest, "targets[1].mesh"},
		{"negative first_device", edit(`"first_device": 12`, `"first_device": -3`), 400, slugInvalidRequest, "targets[1].first_device"},
	}
	for _, c := range cases {
		if c.status == 0 { // 2^20 names of 200 placeholders each: gigabytes of answer
			c.body = strings.Replace(c.body, `"repeat": 4`, `"repeat": 1048575`, 1)
			c.status, c.slug, c.field = 422, slugResponseTooLarge, "tensors[0]"
		}
		t.Run(c.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, "/v1/transfer", "application/json", c.body)
			p := requireProblem(t, rec, c.status, c.slug)
			assert.Contains(t, fields(p), c.field, p.Detail)
		})
	}
}

// TestTransferBudget: a budget between the tiles and the fastest plan's peak gets a
// plan within it (more buckets); a 422 names the least budget, which then plans.
func TestTransferBudget(t *testing.T) {
	s := newTestServer(t, nil)
	rec := postTransfer(t, s, []byte(smallTransfer), "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var free TransferResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &free))
	budget := (free.Summary.ResidentBytes + free.Summary.PeakBytes) / 2
	body := strings.Replace(smallTransfer, `"cost_model"`, `"memory_budget_bytes_per_device": `+itoa(int(budget))+`, "cost_model"`, 1)
	rec = postTransfer(t, s, []byte(body), "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var tight TransferResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &tight))
	assert.LessOrEqual(t, tight.Summary.PeakBytes, budget)
	assert.Greater(t, tight.Summary.Buckets, free.Summary.Buckets)

	// Below the staging buckets' least, and below the tiles alone: the 422 names the
	// least budget that plans (tiles and staging), the same for both, which then plans.
	for _, b := range []int64{free.Summary.ResidentBytes + 1, free.Summary.ResidentBytes / 2, 1} {
		body = strings.Replace(smallTransfer, `"cost_model"`, `"memory_budget_bytes_per_device": `+itoa(int(b))+`, "cost_model"`, 1)
		rec = postTransfer(t, s, []byte(body), "")
		p := requireProblem(t, rec, http.StatusUnprocessableEntity, slugBudgetExceeded)
		var ext struct {
			MinBudget int64 `json:"min_budget_bytes_per_device"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ext), p.Detail)
		require.Greater(t, ext.MinBudget, free.Summary.ResidentBytes, "budget %d: %s", b, p.Detail)
		body = strings.Replace(smallTransfer, `"cost_model"`, `"memory_budget_bytes_per_device": `+itoa(int(ext.MinBudget))+`, "cost_model"`, 1)
		rec = postTransfer(t, s, []byte(body), "")
		require.Equal(t, http.StatusOK, rec.Code, "budget %d: %s", ext.MinBudget, rec.Body.String())
		if rec = postTransfer(t, s, []byte(strings.Replace(body, itoa(int(ext.MinBudget)), itoa(int(ext.MinBudget-1)), 1)), ""); rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("budget %d, one below the minimum: %d, want 422", ext.MinBudget-1, rec.Code)
		}
	}
}

// TestTransferMovesLimit: a plan past SHARDPLAN_MAX_TRANSFER_MOVES is a 400
// limit-exceeded naming tensors; under it, the same request plans.
func TestTransferMovesLimit(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxTransferMoves = 10 })
	rec := postTransfer(t, s, []byte(smallTransfer), "")
	p := requireProblem(t, rec, http.StatusBadRequest, slugLimitExceeded)
	assert.Contains(t, fields(p), "tensors", p.Detail)
	assert.Contains(t, p.Detail, "10 moves")
	s = newTestServer(t, nil)
	rec = postTransfer(t, s, []byte(smallTransfer), "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

// TestTransferAnswerSizeKnown: the answer's size is computed from the request before
// it is built: a limit just under the real answer refuses it (naming include when
// leaving "tensors" out fits), and the estimate is never below the answer.
func TestTransferAnswerSizeKnown(t *testing.T) {
	body := strings.Replace(smallTransfer, `"repeat": 4`, `"repeat": 3000`, 1)
	body = strings.Replace(body, `"cost_model"`, `"include": ["tensors"], "cost_model"`, 1)
	s := newTestServer(t, nil)
	rec := postTransfer(t, s, []byte(body), "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	size := int64(rec.Body.Len())
	// Just under the answer: refused (from the names' size before planning, or when
	// written), naming include; at half of it, from the names before planning.
	for _, limit := range []int64{size - 1, size / 2} {
		s = newTestServer(t, func(d *Deps) { d.Limits.MaxAnswerBytes = limit })
		rec = postTransfer(t, s, []byte(body), "")
		p := requireProblem(t, rec, http.StatusUnprocessableEntity, slugResponseTooLarge)
		assert.Contains(t, fields(p), "include", p.Detail)
		if limit == size/2 {
			assert.Contains(t, p.Detail, "listing 3001 tensor names")
		}
		// Without the tensors list the names are listed once: it fits.
		rec = postTransfer(t, s, []byte(strings.Replace(body, `"include": ["tensors"], `, ``, 1)), "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
}

// TestTransferAnswer: the small transfer's answer in JSON (with transfers and tensors)
// and text.
func TestTransferAnswer(t *testing.T) {
	s := newTestServer(t, nil)
	body := strings.Replace(smallTransfer, `"cost_model"`, `"include": ["tensors", "transfers"], "cost_model"`, 1)
	rec := postTransfer(t, s, []byte(body), "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var resp TransferResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	assert.Equal(t, 5, resp.Summary.Tensors)
	require.Len(t, resp.Tensors, 5)
	assert.Equal(t, "layers.3.w", resp.Tensors[3].Name)
	assert.GreaterOrEqual(t, resp.Summary.TimeUS, resp.Summary.TimeLowerBoundUS)
	// Every group's moves, expanded from runs, carry each target tile's bytes once.
	for _, g := range resp.Groups {
		moves := g.Transfers
		for _, r := range g.TransferRuns {
			for i := range r.Count {
				m := TransferMove{Phase: r.First.Phase + i*r.Step.Phase, From: r.First.From + i*r.Step.From, To: r.First.To + i*r.Step.To,
					Bytes: r.First.Bytes + int64(i)*r.Step.Bytes, Ranges: make([][2]int64, len(r.First.Ranges))}
				for d := range m.Ranges {
					m.Ranges[d] = [2]int64{r.First.Ranges[d][0] + int64(i)*r.Step.Ranges[d][0], r.First.Ranges[d][1] + int64(i)*r.Step.Ranges[d][1]}
				}
				moves = append(moves, m)
			}
		}
		require.Len(t, moves, g.Moves)
		got := map[int]int64{}
		for _, m := range moves {
			got[m.To] += m.Bytes
		}
		for d := 8; d < 16; d++ {
			// Each replica device needs a quarter of the tensor (or all of a replicated one).
			want := g.Bytes / 4
			if len(g.Shape) == 1 {
				want = g.Bytes
			}
			assert.Equal(t, want, got[d], "group %v device %d", g.Tensors[0], d)
		}
	}
	rec = postTransfer(t, s, []byte(smallTransfer), "text/plain")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "candidates:")
	assert.Contains(t, rec.Body.String(), "layers.0.w (+3)")
}

// FuzzTransferBody posts transfer requests: never a 5xx, an error is always a problem.
func FuzzTransferBody(f *testing.F) {
	s := fuzzServer(f)
	f.Add(smallTransfer) // small seeds: the examples' models take a second per run

	f.Add(`{"cost_model": "h100", "fabric_devices": 8, "source": {"mesh": {"axes": [{"name": "x", "size": 4}], "device_ids": [7, 5, 3, 1]}},
	  "targets": [{"mesh": "Mesh('t': 2)", "device_ids": [0, 2]}, {"mesh": "t=2", "first_device": 4}],
	  "tensors": [{"name": "w", "shape": [7, 3], "dtype": "s4", "source": "[{\"x\"}, {}]", "target": "P(None, 't')", "repeat": 3}],
	  "strategy": "tree", "include": ["transfers"]}`)
	f.Add(strings.Replace(smallTransfer, `"layers.{i}.w"`, `"l.{i}.e.{j}.w", "repeat_j": 3`, 1))
	f.Add(strings.Replace(smallTransfer, `"repeat": 4`, `"repeat": -1, "element_bytes": 0`, 1))
	f.Add(fusedTransfer)
	f.Add(strings.Replace(fusedTransfer, `"dim": 0`, `"dim": 1`, 1))
	f.Fuzz(func(t *testing.T, body string) { fuzzEndpoint(t, s, "/v1/transfer", body) })
}

// TestTransferSVG: the drawing has every device of the fabric, coloured by role, and
// one flow per pair of nodes that network moves join.
func TestTransferSVG(t *testing.T) {
	s := newTestServer(t, nil)
	rec := postTransfer(t, s, []byte(smallTransfer), "image/svg+xml")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Header().Get("Content-Type"), "image/svg+xml")
	body := rec.Body.String()
	assert.Equal(t, 16, strings.Count(body, `class="device"`))
	assert.Equal(t, 8, strings.Count(body, `data-role="source idle"`))
	assert.Equal(t, 4, strings.Count(body, `data-role="replica 1"`))
	// Every byte the replicas on node 1 need comes from node 0.
	assert.Equal(t, 1, strings.Count(body, `class="flow"`))
	assert.Contains(t, body, `data-from-node="0" data-to-node="1"`)
}

// TestTransferTextGolden holds the report of the Llama 3 8B example (and the small
// transfer's) as golden files: go test ./api -run TestTransferTextGolden -update.
func TestTransferTextGolden(t *testing.T) {
	s := newTestServer(t, nil)
	example, err := os.ReadFile(filepath.Join("..", "examples", "transfer-llama3-8b-rl-sync.json"))
	require.NoError(t, err)
	for _, tc := range []struct {
		golden string
		body   []byte
	}{
		{"transfer-llama3-8b.txt", example},
		{"transfer-small.txt", []byte(smallTransfer)},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			rec := postTransfer(t, s, tc.body, "text/plain")
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			path := filepath.Join("testdata", tc.golden)
			if *update {
				require.NoError(t, os.WriteFile(path, rec.Body.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			assert.Equal(t, string(want), rec.Body.String())
		})
	}
}

// TestTransferResponseLimit: the moves asked for are charged to
// SHARDPLAN_MAX_RESPONSE_BYTES before they are written.
func TestTransferResponseLimit(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxResponseBytes = 2000 })
	body := strings.Replace(smallTransfer, `"cost_model"`, `"include": ["transfers"], "cost_model"`, 1)
	rec := postTransfer(t, s, []byte(body), "")
	p := requireProblem(t, rec, http.StatusUnprocessableEntity, slugResponseTooLarge)
	assert.Contains(t, p.Detail, "groups[0].transfers")
	// Without the moves the same request is answered.
	rec = postTransfer(t, s, []byte(smallTransfer), "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

// TestTransferNestedRepeats: repeat x repeat_j tensors, named i-major with {i} and {j}
// (or .i and .j appended), one group, counted in the summary.
func TestTransferNestedRepeats(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tc := range []struct {
		name  string
		names []string
	}{
		{`"layers.{i}.experts.{j}.w"`, []string{"layers.0.experts.0.w", "layers.0.experts.1.w", "layers.0.experts.2.w", "layers.1.experts.0.w", "layers.1.experts.1.w", "layers.1.experts.2.w"}},
		{`"e{j}.l{i}"`, []string{"e0.l0", "e1.l0", "e2.l0", "e0.l1", "e1.l1", "e2.l1"}},
		{`"w"`, []string{"w.0.0", "w.0.1", "w.0.2", "w.1.0", "w.1.1", "w.1.2"}},
	} {
		body := strings.Replace(smallTransfer, `"layers.{i}.w"`, tc.name, 1)
		body = strings.Replace(body, `"repeat": 4`, `"repeat": 2, "repeat_j": 3`, 1)
		body = strings.Replace(body, `"cost_model"`, `"include": ["tensors"], "cost_model"`, 1)
		rec := postTransfer(t, s, []byte(body), "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var resp TransferResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
		assert.Equal(t, 7, resp.Summary.Tensors)
		assert.Equal(t, tc.names, resp.Groups[0].Tensors)
		assert.Equal(t, 6, resp.Groups[0].Count)
		require.Len(t, resp.Tensors, 7)
		assert.Equal(t, tc.names[4], resp.Tensors[4].Name)
	}
}

// TestTransferQuantizedTarget: a bf16 tensor cast to fp8 with f32 scales per block of
// 128: cast before the send when every sender holds whole blocks (the network carries
// 8.25 bits an element, not 16), after the receive when the source cuts blocks (the
// network carries bf16 and the receivers stage it); scale bytes counted.
func TestTransferQuantizedTarget(t *testing.T) {
	s := newTestServer(t, nil)
	plain := postTransfer(t, s, []byte(smallTransfer), "")
	require.Equal(t, http.StatusOK, plain.Code, plain.Body.String())
	var base TransferResponse
	require.NoError(t, json.Unmarshal(plain.Body.Bytes(), &base))
	quant := func(source, scales, cast string) string {
		b := strings.Replace(smallTransfer, `"source": [["x", "y"], null]`, `"source": `+source, 1)
		extra := `"target_dtype": "f8e4m3fn", "scales": ` + scales
		if cast != "" {
			extra += `, "cast": "` + cast + `"`
		}
		return strings.Replace(b, `"repeat": 4`, `"repeat": 4, `+extra, 1)
	}
	block := `{"granularity": "block", "block_size": 128}`
	for _, tc := range []struct {
		name, source, scales, cast string
		want                       string
		bits                       float64
	}{
		{"whole blocks: before the send", `[["x", "y"], null]`, block, "", "before_send", 8 + 32.0/128},
		{"tiles of 512 hold whole blocks of 128", `[null, ["x", "y"]]`, block, "", "before_send", 8 + 32.0/128},
		{"tiles of 512 cut blocks of 1024", `[null, ["x", "y"]]`, `{"granularity": "block", "block_size": 1024}`, "", "after_receive", 16},
		{"asked after", `[["x", "y"], null]`, block, "after_receive", "after_receive", 16},
		{"per channel, rows whole", `[["x", "y"], null]`, `{"granularity": "channel"}`, "", "before_send", 8 + 32.0/4096},
		{"per channel, rows cut", `[null, ["x", "y"]]`, `{"granularity": "channel"}`, "", "after_receive", 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := postTransfer(t, s, []byte(quant(tc.source, tc.scales, tc.cast)), "")
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			var resp TransferResponse
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
			g := resp.Groups[0]
			assert.Equal(t, tc.want, g.Cast)
			assert.Equal(t, "f8e4m3fn", g.TargetDType)
			assert.Equal(t, int64(1024*4096*2), g.Bytes, "the source's bytes")
			assert.InDelta(t, tc.bits, g.MovedBitsPerElement, 1e-9)
			assert.Equal(t, int64(1024*4096), g.TargetBytes-g.ScaleBytes, "fp8: a byte an element")
			if strings.Contains(tc.scales, "block") && tc.bits != 16 {
				assert.Equal(t, int64(1024*4096/128*4), g.ScaleBytes)
			}
			if tc.want == "before_send" {
				assert.Less(t, resp.Summary.NetworkBytes, base.Summary.NetworkBytes*6/10, "the cast halves the network bytes")
			} else {
				assert.Greater(t, resp.Summary.NetworkBytes, base.Summary.NetworkBytes*9/10, "the network carries bf16")
			}
		})
	}
	bad := quant(`[null, ["x", "y"]]`, `{"granularity": "block", "block_size": 1024}`, "before_send")
	p := requireProblem(t, do(t, s, http.MethodPost, "/v1/transfer", "application/json", bad), http.StatusBadRequest, slugInvalidRequest)
	assert.Contains(t, fields(p), "tensors[0].cast", p.Detail)
	bad = strings.Replace(smallTransfer, `"repeat": 4`, `"repeat": 4, "scales": {"granularity": "channel"}`, 1)
	p = requireProblem(t, do(t, s, http.MethodPost, "/v1/transfer", "application/json", bad), http.StatusBadRequest, slugInvalidRequest)
	assert.Contains(t, fields(p), "tensors[0].scales", p.Detail)
	bad = quant(`[["x", "y"], null]`, `{"granularity": "block"}`, "")
	p = requireProblem(t, do(t, s, http.MethodPost, "/v1/transfer", "application/json", bad), http.StatusBadRequest, slugInvalidRequest)
	assert.Contains(t, fields(p), "tensors[0].scales.block_size", p.Detail)
}
