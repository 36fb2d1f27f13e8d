package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fusedTransfer fuses GQA attention (q 512 rows, k and v 128 each) into qkv_proj on the
// targets, tp=4 over the fused 768 rows: tiles of 192 rows cut q and k unevenly.
const fusedTransfer = `{"cost_model": "h100", "fabric_devices": 16,
 "source": {"name": "trainer", "mesh": "x=2,y=4", "first_device": 0},
 "targets": [{"mesh": "tp=4", "device_ids": [8, 9, 10, 11]}, {"mesh": "tp=4", "first_device": 12}],
 "tensors": [{"name": "layers.{i}.q_proj.weight", "shape": [512, 256], "dtype": "bf16", "source": [["x", "y"], null], "repeat": 2},
             {"name": "layers.{i}.k_proj.weight", "shape": [128, 256], "dtype": "bf16", "source": [null, "y"], "repeat": 2},
             {"name": "layers.{i}.v_proj.weight", "shape": [128, 256], "dtype": "bf16", "source": ["x", null], "repeat": 2},
             {"name": "norm", "tensor": "bf16[256]", "source": "P('y')", "target": [null]}],
 "fused": [{"name": "layers.{i}.qkv_proj.weight", "dim": 0,
            "parts": ["layers.{i}.q_proj.weight", "layers.{i}.k_proj.weight", "layers.{i}.v_proj.weight"],
            "target": ["tp", null]}],
 "include": ["transfers"]}`

// TestTransferFused: each part's moves bring every target device exactly the rows of
// its part that its fused tile covers, and the answer reports the fused tensor.
func TestTransferFused(t *testing.T) {
	s := newTestServer(t, nil)
	rec := postTransfer(t, s, []byte(fusedTransfer), "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var resp TransferResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	require.Len(t, resp.Fused, 1)
	f := resp.Fused[0]
	assert.Equal(t, []int64{768, 256}, f.Shape)
	assert.Equal(t, 2, f.Count)
	assert.Equal(t, int64(768*256*2), f.Bytes)
	require.Len(t, f.Parts, 3)
	// Per part: its offset and size, and the rows of the part each device of a replica
	// (mesh position) receives: fused tile [192p, 192(p+1)) shifted by the offset.
	want := []struct {
		offset, size int64
		rows         map[int][2]int64 // mesh position -> part rows
	}{
		{0, 512, map[int][2]int64{0: {0, 192}, 1: {192, 384}, 2: {384, 512}}},
		{512, 128, map[int][2]int64{2: {0, 64}, 3: {64, 128}}},
		{640, 128, map[int][2]int64{3: {0, 128}}},
	}
	for k, w := range want {
		part := f.Parts[k]
		assert.Equal(t, w.offset, part.Offset, part.Name)
		assert.Equal(t, w.size, part.Size, part.Name)
		g := resp.Groups[part.Group]
		require.NotNil(t, g.Fused, part.Name)
		assert.Equal(t, w.offset, g.Fused.Offset)
		assert.Equal(t, "layers.0."+[]string{"q", "k", "v"}[k]+"_proj.weight", g.Tensors[0])
		moves := g.Transfers
		for _, r := range g.TransferRuns {
			for i := range r.Count {
				m := r.First
				m.From += i * r.Step.From
				m.To += i * r.Step.To
				m.Phase += i * r.Step.Phase
				m.Bytes += int64(i) * r.Step.Bytes
				m.Ranges = make([][2]int64, len(r.First.Ranges))
				for d := range m.Ranges {
					for e := range 2 {
						m.Ranges[d][e] = r.First.Ranges[d][e] + int64(i)*r.Step.Ranges[d][e]
					}
				}
				moves = append(moves, m)
			}
		}
		// Rows each target device received (the source is on node 0, the targets on
		// node 1: every row a target holds came in a move).
		got := map[int][2]int64{}
		for _, m := range moves {
			if m.To < 8 {
				continue // a relay inside the source node
			}
			pos := (m.To - 8) % 4
			r, ok := got[pos]
			if !ok {
				r = m.Ranges[0]
			}
			got[pos] = [2]int64{min(r[0], m.Ranges[0][0]), max(r[1], m.Ranges[0][1])}
			assert.Equal(t, [2]int64{0, 256}, [2]int64{min(m.Ranges[1][0], 0), max(m.Ranges[1][1], 256)}, "columns inside the tensor")
		}
		assert.Equal(t, w.rows, got, part.Name)
	}
}

// TestTransferFusedSchedule: the schedule lists each fused tensor after the moved ones
// with its parts; devices 10 and 14 (tp position 2 of each replica, fused rows
// [384, 576)) name layers.0.qkv_proj.weight's target buffer once, and the q and k
// parts' receives and copies fill it, q's rows 384..512 at local rows 0..128 and k's
// rows 0..64 at 128..192, each element once.
func TestTransferFusedSchedule(t *testing.T) {
	s := newTestServer(t, nil)
	body := strings.Replace(fusedTransfer, `"include": ["transfers"]`, `"include": ["schedule"]`, 1)
	rec := postTransfer(t, s, []byte(body), "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var resp TransferResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	sc := resp.Schedule
	require.NotNil(t, sc)
	byName := map[string]int{}
	for i, tn := range sc.Tensors {
		byName[tn.Name] = i
	}
	for l, layer := range []string{"layers.0.", "layers.1."} {
		fi, ok := byName[layer+"qkv_proj.weight"]
		require.True(t, ok, "%s qkv in %v", layer, byName)
		ft := sc.Tensors[fi]
		assert.Equal(t, []int64{768, 256}, ft.Shape)
		assert.Greater(t, fi, byName["norm"], "fused tensors come after the moved ones")
		var parts []int
		for k, part := range []string{"q", "k", "v"} {
			pi := byName[layer+part+"_proj.weight"]
			parts = append(parts, pi)
			require.NotNil(t, sc.Tensors[pi].Fused, part)
			assert.Equal(t, ScheduleTensorFused{Tensor: fi, Dim: 0, Offset: []int64{0, 512, 640}[k]}, *sc.Tensors[pi].Fused)
		}
		assert.Equal(t, parts, ft.Parts)
		assert.Nil(t, sc.Tensors[byName["norm"]].Fused)
		if l > 0 {
			continue
		}
		for _, dev := range []int64{10, 14} {
			r, ok := sc.rank(dev)
			require.True(t, ok, dev)
			var bufs []ScheduleBuffer
			for _, b := range r.Buffers {
				if b.Tensor == int64(fi) || b.Tensor == int64(parts[0]) && b.Buffer == "target" {
					bufs = append(bufs, b)
				}
			}
			require.Len(t, bufs, 1, "device %d: one fused buffer", dev)
			assert.Equal(t, [][2]int64{{384, 576}, {0, 256}}, bufs[0].Global)
			assert.Equal(t, "target", bufs[0].Buffer)
			written := map[int64]int{} // local row -> elements written
			for _, ph := range r.Phases {
				for _, op := range ph.Ops {
					if op.Op == "send" || op.Dst != "target" || (op.Tensor != int64(parts[0]) && op.Tensor != int64(parts[1])) {
						continue
					}
					off := map[int64]int64{int64(parts[0]): 0, int64(parts[1]): 512}[op.Tensor]
					assert.Equal(t, op.Global[0][0]+off-384, op.DstLocal[0][0], "device %d op %+v", dev, op)
					assert.Equal(t, op.Global[0][1]+off-384, op.DstLocal[0][1], "device %d op %+v", dev, op)
					for row := op.DstLocal[0][0]; row < op.DstLocal[0][1]; row++ {
						written[row] += int(op.DstLocal[1][1] - op.DstLocal[1][0])
					}
				}
			}
			require.Len(t, written, 192, "device %d", dev)
			for row, n := range written {
				assert.Equal(t, 256, n, "device %d local row %d", dev, row)
			}
		}
	}
}

// TestTransferFusedReports: the text report and the drawing take fused targets.
func TestTransferFusedReports(t *testing.T) {
	s := newTestServer(t, nil)
	for _, accept := range []string{"text/plain", "image/svg+xml"} {
		rec := postTransfer(t, s, []byte(fusedTransfer), accept)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assert.Contains(t, rec.Header().Get("Content-Type"), strings.Split(accept, "/")[1])
	}
}

func TestTransferFusedBadInput(t *testing.T) {
	s := newTestServer(t, nil)
	edit := func(old, new string) string {
		require.Contains(t, fusedTransfer, old)
		return strings.Replace(fusedTransfer, old, new, 1)
	}
	cases := []struct {
		name, body, field string
		slug              string
	}{
		{"part not a tensor", edit(`"layers.{i}.k_proj.weight", "layers.{i}.v_proj.weight"]`, `"layers.{i}.o_proj.weight", "layers.{i}.v_proj.weight"]`), "fused[0].parts[1]", slugInvalidRequest},
		{"part listed twice", edit(`"layers.{i}.v_proj.weight"],`, `"layers.{i}.q_proj.weight"],`), "fused[0].parts[2]", slugInvalidRequest},
		{"shapes disagree off the fused dim", edit(`[128, 256], "dtype": "bf16", "source": [null, "y"]`, `[128, 512], "dtype": "bf16", "source": [null, "y"]`), "fused[0].parts[1]", slugInvalidRequest},
		{"ranks disagree", edit(`[128, 256], "dtype": "bf16", "source": [null, "y"]`, `[128], "dtype": "bf16", "source": [null]`), "fused[0].parts[1]", slugInvalidRequest},
		{"dtypes disagree", edit(`"dtype": "bf16", "source": ["x", null]`, `"dtype": "f32", "source": ["x", null]`), "fused[0].parts[2]", slugInvalidRequest},
		{"repeats disagree", edit(`"source": ["x", null], "repeat": 2`, `"source": ["x", null], "repeat": 3`), "fused[0].parts[2]", slugInvalidRequest},
		{"dim outside the rank", edit(`"dim": 0`, `"dim": 2`), "fused[0].dim", slugInvalidRequest},
		{"bad fused target", edit(`"target": ["tp", null]}]`, `"target": ["q", null]}]`), "fused[0].target[0]", slugInvalidRequest},
		{"part with its own target", edit(`"source": [null, "y"], "repeat": 2`, `"source": [null, "y"], "target": [null, null], "repeat": 2`), "tensors[1].target", slugInvalidSharding},
		{"part with a target dtype", edit(`"source": [null, "y"], "repeat": 2`, `"source": [null, "y"], "target_dtype": "f8e4m3fn", "repeat": 2`), "tensors[1].target_dtype", slugInvalidSharding},
		{"tensor without target", edit(`, "target": [null]}`, `}`), "tensors[3].target", slugInvalidSharding},
		{"fused name placeholder", edit(`"layers.{i}.qkv_proj.weight"`, `"layers.{l}.qkv"`), "fused[0].name", slugInvalidRequest},
		{"fused without name", edit(`"name": "layers.{i}.qkv_proj.weight", `, ``), "fused[0].name", slugInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, "/v1/transfer", "application/json", c.body)
			p := requireProblem(t, rec, 400, c.slug)
			assert.Contains(t, fields(p), c.field, p.Detail)
		})
	}
}
