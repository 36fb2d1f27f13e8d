package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/nccltests"
)

// The fidelity suite: every published nccl-tests point of internal/cost/testdata/nccl
// priced as a user would price it (one collective on a one-axis mesh through
// /v1/reshard, a sendrecv ring through /v1/transfer), on the file's profile adjusted to
// the measured cluster (cost.MeasuredModel: its GPUs per node, its NIC rate), per
// collective and scope on points of 1 MiB and more. docs/PERFORMANCE.md's fidelity
// table records the errors; the test fails when one grows past it.

const fidelityDir = "../internal/cost/testdata/nccl"

type fidelityFile struct {
	id      string
	profile string
	heldOut bool
	points  []cost.Measurement
}

func readFidelity(t *testing.T) []fidelityFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fidelityDir, "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	sort.Strings(paths)
	var out []fidelityFile
	for _, path := range paths {
		f, err := os.Open(path)
		require.NoError(t, err)
		res, err := nccltests.Parse(f)
		f.Close()
		require.NoError(t, err, path)
		ms, err := cost.MeasurementsOf(res, filepath.Base(path))
		require.NoError(t, err)
		var big []cost.Measurement
		for _, m := range ms {
			if m.Bytes >= cost.FitMinBytes {
				big = append(big, m)
			}
		}
		out = append(out, fidelityFile{id: filepath.Base(path), profile: res.Header["profile"], heldOut: res.Header["set"] == "heldout", points: big})
	}
	return out
}

// fidelityModel is the cost_model object of the cluster m ran on.
func fidelityModel(t *testing.T, profile string, m cost.Measurement) string {
	base, ok := cost.Lookup(profile)
	require.True(t, ok, profile)
	p := cost.MeasuredModel(base, m)
	obj := map[string]any{"base": profile}
	if p.GPUsPerNode != base.GPUsPerNode {
		obj["gpus_per_node"] = p.GPUsPerNode
	}
	if m.NICGBps > 0 {
		obj["links"] = map[string]any{"ib": map[string]any{"bandwidth_gbps": m.NICGBps}}
	}
	data, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(data)
}

// fidelityPrice prices m through the API: the plan's time and its one step's op.
func fidelityPrice(t *testing.T, h http.Handler, profile string, m cost.Measurement) float64 {
	t.Helper()
	n := int64(m.Ranks)
	model := fidelityModel(t, profile, m)
	if m.Kind == cost.CollectivePermute {
		// sendrecv_perf: every rank sends its buffer to the next.
		ids := make([]string, n)
		for i := range ids {
			ids[i] = strconv.FormatInt((int64(i)+1)%n, 10)
		}
		body := fmt.Sprintf(`{"cost_model": %s, "fabric_devices": %d, "source": {"mesh": "X=%d", "first_device": 0},
		  "targets": [{"mesh": "X=%d", "device_ids": [%s]}],
		  "tensors": [{"name": "buf", "shape": [%d], "dtype": "u8", "source": ["X"], "target": ["X"]}]}`,
			model, n, n, n, strings.Join(ids, ","), m.Bytes*n)
		rec := postTransfer(t, h, []byte(body), "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var resp TransferResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
		return resp.Summary.TimeUS
	}
	// One collective on a one-axis mesh of the ranks, f32 elements: an [n, k] array
	// whose bytes are the nccl-tests size (for all_to_all, n times one rank's buffer).
	k := max(int64(math.Round(float64(m.Bytes)/float64(4*n))), 1)
	var shape, src, tgt, op string
	switch m.Kind {
	case cost.AllGather:
		shape, src, tgt, op = fmt.Sprintf("[%d, %d]", n, k), `["X", null]`, `[null, null]`, "all_gather"
	case cost.ReduceScatter:
		shape, src, tgt, op = fmt.Sprintf("[%d, %d]", n, k), `{"dims": [{"axes": []}, {"axes": []}], "unreduced": ["X"]}`, `["X", null]`, "reduce_scatter"
	case cost.AllReduce:
		shape, src, tgt, op = fmt.Sprintf("[%d, %d]", n, k), `{"dims": [{"axes": []}, {"axes": []}], "unreduced": ["X"]}`, `[null, null]`, "all_reduce"
	case cost.AllToAll:
		shape, src, tgt, op = fmt.Sprintf("[%d, %d]", n, n*k), `["X", null]`, `[null, "X"]`, "all_to_all"
	default:
		t.Fatalf("%s: kind %s", m.Source, m.Kind)
	}
	body := fmt.Sprintf(`{"mesh": "X=%d", "shape": %s, "dtype": "f32", "source": %s, "target": %s,
	  "allowed_ops": [%q], "cost_model": %s}`, n, shape, src, tgt, op, model)
	r := postReshard(t, h, body)
	// The answer is the plan's time: one collective, or several of the same kind over
	// sub-groups when the model prices that lower (a hierarchical all_reduce).
	require.NotEmpty(t, r.Steps, m.Source)
	for _, st := range r.Steps {
		require.Equal(t, op, st.Op, m.Source)
	}
	return r.Summary.TimeUS
}

// fidelityCollective names a measurement's collective as nccl-tests does.
func fidelityCollective(k cost.Kind) string {
	if k == cost.CollectivePermute {
		return "sendrecv"
	}
	return string(k)
}

func TestFidelity(t *testing.T) {
	if testing.Short() {
		t.Skip("prices every published point through the API")
	}
	s := newTestServer(t, nil)
	type acc struct {
		files              map[string]bool
		logSum, worst      float64
		n                  int
		heldSum, heldWorst float64
		heldN              int
	}
	rows := map[[2]string]*acc{}
	for _, f := range readFidelity(t) {
		for _, m := range f.points {
			got := fidelityPrice(t, s, f.profile, m)
			require.Positive(t, got, m.Source)
			l := math.Abs(math.Log(got / m.TimeUS))
			key := [2]string{fidelityCollective(m.Kind), string(m.Scope())}
			a := rows[key]
			if a == nil {
				a = &acc{files: map[string]bool{}}
				rows[key] = a
			}
			a.files[f.id] = true
			a.logSum += l
			a.worst = math.Max(a.worst, l)
			a.n++
			if f.heldOut {
				a.heldSum += l
				a.heldWorst = math.Max(a.heldWorst, l)
				a.heldN++
			}
		}
	}
	keys := make([][2]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	pct := func(l float64) string { return fmt.Sprintf("%.1f%%", 100*math.Expm1(l)) }
	var table strings.Builder
	table.WriteString("| collective | scope | files | points | geomean | worst | held-out points | held-out geomean | held-out worst |\n")
	table.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	got := map[[2]string][2]float64{}
	for _, k := range keys {
		a := rows[k]
		hg, hw := "-", "-"
		if a.heldN > 0 {
			hg, hw = pct(a.heldSum/float64(a.heldN)), pct(a.heldWorst)
		}
		geo := a.logSum / float64(a.n)
		fmt.Fprintf(&table, "| %s | %s | %d | %d | %s | %s | %d | %s | %s |\n", k[0], k[1], len(a.files), a.n, pct(geo), pct(a.worst), a.heldN, hg, hw)
		got[k] = [2]float64{100 * math.Expm1(geo), 100 * math.Expm1(a.worst)}
	}
	t.Logf("fidelity (points >= 1 MiB):\n%s", table.String())

	recorded := recordedFidelity(t)
	for _, k := range keys {
		want, ok := recorded[k]
		if !assert.True(t, ok, "docs/PERFORMANCE.md's fidelity table has no row %s / %s; add it from the table above", k[0], k[1]) {
			continue
		}
		assert.LessOrEqual(t, got[k][0], want[0]+0.05, "%s / %s: geometric-mean error grew past docs/PERFORMANCE.md's %.1f%%", k[0], k[1], want[0])
		assert.LessOrEqual(t, got[k][1], want[1]+0.05, "%s / %s: worst error grew past docs/PERFORMANCE.md's %.1f%%", k[0], k[1], want[1])
	}
}

var fidelityRowRE = regexp.MustCompile(`^\| (\w+) \| (\w+) \| \d+ \| \d+ \| ([0-9.]+)% \| ([0-9.]+)% \|`)

// recordedFidelity reads docs/PERFORMANCE.md's fidelity table (between its
// fidelity-table markers): per collective and scope, the geometric-mean and worst
// error in percent.
func recordedFidelity(t *testing.T) map[[2]string][2]float64 {
	data, err := os.ReadFile("../docs/PERFORMANCE.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(data), "<!-- fidelity-table -->")
	require.True(t, ok, "docs/PERFORMANCE.md has no <!-- fidelity-table --> marker")
	body, _, ok := strings.Cut(rest, "<!-- /fidelity-table -->")
	require.True(t, ok, "docs/PERFORMANCE.md has no <!-- /fidelity-table --> marker")
	out := map[[2]string][2]float64{}
	for _, line := range strings.Split(body, "\n") {
		if m := fidelityRowRE.FindStringSubmatch(line); m != nil {
			g, _ := strconv.ParseFloat(m[3], 64)
			w, _ := strconv.ParseFloat(m[4], 64)
			out[[2]string{m[1], m[2]}] = [2]float64{g, w}
		}
	}
	return out
}
