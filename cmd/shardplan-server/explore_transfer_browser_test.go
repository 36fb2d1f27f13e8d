package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/testgen"
)

// TestExplorerTransferPane pastes 256-GPU transfers into /explore's transfer pane (a
// trainer of 128 H100s to 16 replicas of 8 on other nodes; a trainer of 256 to 32
// replicas of 8 on the same nodes, where NVLink moves stay out of the table): the pane
// shows the answer's summary, the server's drawing inside the pane, and a node x replica
// table of network bytes with one row per target node and one column per replica, each
// replica's bytes on its own node, summing to the answer's network bytes. The first is
// also pasted into the module box, which hands a transfer to the transfer pane.
func TestExplorerTransferPane(t *testing.T) {
	const gpus = 8 // the h100 fabric's GPUs per node; every replica fills one node
	cases := []struct {
		name      string
		body      string
		replicas  int
		firstNode int // replica r is on node firstNode+r
	}{
		{"trainer of 128 to 16 replicas of 8", string(testgen.TransferRequestJSON("h100", 256,
			testgen.At("trainer", "fsdp=16,tp=8", 0), testgen.Replicas("tp=8", 16, gpus, 128), testgen.Llama3_8B.Tensors())), 16, 128 / gpus},
		{"trainer of 256 to 32 colocated replicas of 8", string(testgen.TransferRequestJSON("h100", 256,
			testgen.At("trainer", "fsdp=32,tp=8", 0), testgen.Replicas("tp=8", 32, gpus, 0), testgen.Llama3_8B.Tensors())), 32, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkTransferPane(t, tc.body, tc.replicas, tc.firstNode, i == 0, fmt.Sprintf("explore-transfer-%d.png", i+1))
		})
	}
}

func checkTransferPane(t *testing.T, body string, replicaCount, firstNode int, viaModule bool, shot string) {
	ctx, base, wd := openInBrowser(t, "/explore", 120*time.Second)
	var answer struct {
		Summary struct {
			Strategy       string  `json:"strategy"`
			Why            string  `json:"why"`
			TimeUS         float64 `json:"time_us"`
			TimeEfficiency float64 `json:"time_efficiency"`
			NetworkBytes   int64   `json:"network_bytes"`
		} `json:"summary"`
	}
	postPlan(t, base+"/v1/transfer", "application/json", body, &answer)
	require.Positive(t, answer.Summary.NetworkBytes)
	resp, svg := sendWith(t, http.DefaultClient, http.MethodPost, base+"/v1/transfer", body, map[string]string{"Accept": "image/svg+xml"})
	require.Equal(t, http.StatusOK, resp.StatusCode, svg)
	flows := strings.Count(svg, `class="flow"`)
	require.Positive(t, flows)

	wd.waitScript(ctx, t, "page ready", `return document.body.dataset.ready === "true"`)
	if viaModule {
		// The page's own example plans: two replicas on two nodes, a row and a column each.
		wd.click(ctx, t, wd.waitElement(ctx, t, "#show-transfer"))
		wd.waitScript(ctx, t, "example drawn", `return document.getElementById("transfer-view").dataset.ready === "true"`)
		assert.EqualValues(t, 2, wd.script(ctx, t, `return document.querySelectorAll("#transfer-matrix tbody tr").length`))
		assert.EqualValues(t, 2, wd.script(ctx, t, `return document.querySelectorAll("#transfer-matrix thead th[data-replica]").length`))
		wd.script(ctx, t, `delete document.getElementById("transfer-view").dataset.ready`)
	}
	wd.script(ctx, t, `document.getElementById("transfer-request").value = arguments[0]`, body)
	wd.click(ctx, t, wd.waitElement(ctx, t, "#show-transfer"))
	wd.waitScript(ctx, t, "transfer drawn", `return document.getElementById("transfer-view").dataset.ready === "true"`)

	// The summary is the answer's.
	var summary map[string]string
	wd.scriptJSON(ctx, t, &summary, `return JSON.stringify(Object.fromEntries([...document.querySelectorAll("#transfer-summary dd")].map(d => [d.dataset.field, d.textContent])))`)
	assert.True(t, strings.HasPrefix(summary["strategy"], answer.Summary.Strategy), "strategy %q", summary["strategy"])
	assert.Equal(t, answer.Summary.Why, summary["why"])
	assert.NotEmpty(t, summary["time"])
	assert.NotEmpty(t, summary["lower bound"])
	assert.Contains(t, summary["efficiency"], fmt.Sprintf("%.1f%%", 100*answer.Summary.TimeEfficiency))

	// The drawing is the server's (every device, every flow) and lies inside the pane.
	var box struct {
		Devices, Flows                 int
		Left, Right, Top, Bottom, W, H float64
		PLeft, PRight, PTop, PBottom   float64
	}
	wd.scriptJSON(ctx, t, &box, `const s = document.querySelector("#transfer-svg svg"), p = document.getElementById("transfer-view");
		const r = s.getBoundingClientRect(), q = p.getBoundingClientRect();
		return JSON.stringify({Devices: s.querySelectorAll("rect.device").length, Flows: s.querySelectorAll("path.flow").length,
			Left: r.left, Right: r.right, Top: r.top, Bottom: r.bottom, W: r.width, H: r.height, PLeft: q.left, PRight: q.right, PTop: q.top, PBottom: q.bottom})`)
	assert.Equal(t, 256, box.Devices)
	assert.Equal(t, flows, box.Flows)
	assert.Positive(t, box.W)
	assert.Positive(t, box.H)
	assert.GreaterOrEqual(t, box.Left, box.PLeft-0.5)
	assert.LessOrEqual(t, box.Right, box.PRight+0.5)
	assert.GreaterOrEqual(t, box.Top, box.PTop-0.5)
	assert.LessOrEqual(t, box.Bottom, box.PBottom+0.5)

	// The flow table: one row per target node (16..31), one column per replica (0..15).
	var table struct {
		Cols  []string            `json:"cols"`
		Rows  map[string][]string `json:"rows"`
		Cells map[string][]string `json:"cells"`
	}
	wd.scriptJSON(ctx, t, &table, `const t = document.getElementById("transfer-matrix");
		const rows = {}, cells = {};
		for (const tr of t.querySelectorAll("tbody tr")) {
			rows[tr.dataset.node] = [...tr.querySelectorAll("td[data-replica]")].map(td => td.dataset.replica);
			cells[tr.dataset.node] = [...tr.querySelectorAll("td[data-replica]")].map(td => td.dataset.bytes);
		}
		return JSON.stringify({cols: [...t.querySelectorAll("thead th[data-replica]")].map(th => th.dataset.replica), rows, cells})`)
	var replicas []string
	for r := range replicaCount {
		replicas = append(replicas, strconv.Itoa(r))
	}
	assert.Equal(t, replicas, table.Cols)
	require.Len(t, table.Rows, replicaCount)
	var sum int64
	for r := range replicaCount {
		node := strconv.Itoa(firstNode + r)
		require.Contains(t, table.Rows, node, "a row for target node %s", node)
		assert.Equal(t, replicas, table.Rows[node])
		for c, v := range table.Cells[node] {
			b, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, "node %s replica %d: %q", node, c, v)
			assert.GreaterOrEqual(t, b, int64(0))
			if c != r {
				assert.Zero(t, b, "node %s holds replica %d only; bytes for replica %d", node, r, c)
			}
			sum += b
		}
	}
	assert.Equal(t, answer.Summary.NetworkBytes, sum, "the table sums to the answer's network bytes")
	wd.script(ctx, t, `document.getElementById("transfer-input").scrollIntoView({block: "start"})`)
	wd.saveScreenshot(ctx, t, shot)
	if !viaModule {
		assertSelfContained(ctx, t, wd, base, 5)
		return
	}

	// The same request pasted into the module box is planned in the transfer pane.
	wd.script(ctx, t, `const v = document.getElementById("transfer-view"); delete v.dataset.ready; document.getElementById("transfer-summary").replaceChildren();
		document.getElementById("transfer-request").value = ""; document.getElementById("module").value = arguments[0]`, body)
	wd.click(ctx, t, wd.waitElement(ctx, t, "#show-graph"))
	wd.waitScript(ctx, t, "transfer from the module box drawn", `return document.getElementById("transfer-view").dataset.ready === "true"`)
	assert.Equal(t, answer.Summary.Why, wd.script(ctx, t, `return document.querySelector('#transfer-summary dd[data-field="why"]').textContent`))
	assert.EqualValues(t, strconv.FormatInt(answer.Summary.NetworkBytes, 10),
		wd.script(ctx, t, `return document.querySelector("#transfer-matrix tfoot td[data-bytes]").dataset.bytes`))
	assertSelfContained(ctx, t, wd, base, 5)
}
