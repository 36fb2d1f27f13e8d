package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layoutScript measures the drawn page: every SVG of the reshard views against the panel
// it sits in, the page's own width against the window, and every pair of labels of one
// SVG that overlap (by their bounding boxes, after layout), with the smallest label
// height drawn.
const layoutScript = `
const out = {pageWidth: document.documentElement.scrollWidth, window: innerWidth, wide: [], overlaps: [], minLabel: 1e9, labels: 0};
for (const panel of document.querySelectorAll("#views .panel")) {
  const pr = panel.getBoundingClientRect();
  for (const svg of panel.querySelectorAll("svg")) {
    const r = svg.getBoundingClientRect();
    if (r.left < pr.left - 0.5 || r.right > pr.right + 0.5) {
      out.wide.push(panel.id + " " + (svg.getAttribute("class") || "") + ": " + Math.round(r.left) + ".." + Math.round(r.right) + " in " + Math.round(pr.left) + ".." + Math.round(pr.right));
    }
    const boxes = [...svg.querySelectorAll("text")].filter(t => t.textContent.trim() !== "").map(t => [t.textContent, t.getBoundingClientRect()]);
    for (const [, b] of boxes) { out.minLabel = Math.min(out.minLabel, b.height); out.labels++; }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i][1], b = boxes[j][1];
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1 && out.overlaps.length < 10) out.overlaps.push(panel.id + ": " + JSON.stringify(boxes[i][0]) + " over " + JSON.stringify(boxes[j][0]));
      }
    }
  }
}
return JSON.stringify(out);`

type pageLayout struct {
	PageWidth int      `json:"pageWidth"`
	Window    int      `json:"window"`
	Wide      []string `json:"wide"`
	Overlaps  []string `json:"overlaps"`
	MinLabel  float64  `json:"minLabel"`
	Labels    int      `json:"labels"`
}

// assertLayout checks that nothing of the reshard views is wider than its panel (nor the
// page than the window), that no two labels overlap, and that every label is drawn at a
// legible size.
func assertLayout(ctx context.Context, t *testing.T, wd *webDriver, what string) {
	t.Helper()
	var l pageLayout
	wd.scriptJSON(ctx, t, &l, layoutScript)
	assert.LessOrEqual(t, l.PageWidth, l.Window, "%s: the page scrolls sideways", what)
	assert.Empty(t, l.Wide, "%s: drawings wider than their panel", what)
	assert.Empty(t, l.Overlaps, "%s: overlapping labels", what)
	require.Positive(t, l.Labels, "%s: no labels drawn", what)
	assert.GreaterOrEqual(t, l.MinLabel, 9.0, "%s: a label drawn smaller than 9 px", what)
}

// showReshard types a reshard into the page's form, submits it and waits for the plan
// the API gives the same request.
func showReshard(ctx context.Context, t *testing.T, wd *webDriver, base, mesh, tensor, source, target, strategy string, devices int) (plan struct {
	PlanID string        `json:"plan_id"`
	Steps  []browserStep `json:"steps"`
}) {
	t.Helper()
	req := map[string]any{"mesh": mesh, "tensor": tensor, "source": source, "target": target, "cost_model": "tpu-v5p", "strategy": strategy}
	if devices <= 4096 {
		req["include"] = []string{"pairs"} // as the page asks, up to its PAIRS_LIMIT
	}
	body, err := json.Marshal(req)
	require.NoError(t, err)
	postPlan(t, base+"/v1/reshard", "application/json", string(body), &plan)
	wd.script(ctx, t, `for (const [k, v] of Object.entries(arguments[0])) document.getElementById(k).value = v;
		document.getElementById("allowed-ops").value = "";
		document.getElementById("show").click();`,
		map[string]string{"mesh": mesh, "tensor": tensor, "source": source, "target": target, "strategy": strategy, "cost-model": "tpu-v5p"})
	// A plan of a large mesh takes a few seconds to plan and draw: wait longer than a poll.
	start := time.Now()
	for {
		var v any
		err := wd.post(ctx, "/execute/sync", map[string]any{"script": `const p = document.getElementById("plan"); return p.dataset.ready === "true" && p.dataset.planId === arguments[0] && p.dataset.drawn === "0"`,
			"args": []any{plan.PlanID}}, &v)
		if err == nil && v == true {
			break
		}
		require.Less(t, time.Since(start), 90*time.Second, "plan not drawn (status: %v)", wd.script(ctx, t, `return document.getElementById("status").textContent`))
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s devices: drawn in %s", mesh, time.Since(start).Round(time.Millisecond))
	return plan
}

// TestExplorerAtScale draws reshards on meshes of 8, 256 and 4,096 devices in headless
// Chromium and checks the layout by bounding boxes: every drawing inside its panel, no
// overlapping labels, labels legible. Above DEVICE_VIEW_LIMIT devices the mesh is drawn
// as groups of devices (one box per group, zoomable), a collective's groups as stripes
// and point-to-point moves as a matrix; a target split 256 ways is drawn in colour, not
// as white borders. An error clears the previous plan. Screenshots of every size go to
// $SHARDPLAN_ARTIFACTS (explore-scale-*.png).
func TestExplorerAtScale(t *testing.T) {
	ctx, base, wd := openInBrowser(t, "/explore", 300*time.Second)
	wd.waitScript(ctx, t, "page ready", `return document.body.dataset.ready === "true" && document.getElementById("plan").dataset.ready === "true"`)

	cases := []struct {
		name, mesh, tensor, source, target, strategy string
		devices, items                               int
		mode                                         string
	}{
		{"8", "X=2,Y=4", "f32[2048,2048]", "P('X', None)", "P('Y', 'X')", "xla", 8, 8, "devices"},
		{"256", "C=1,D=2,Y=8,X=4,T=4", "f32[2048,2048]", "P('D', ('X','Y'))", "P(None, ('D','Y','X','T'))", "optimal", 256, 64, "blocks"},
		{"4096", "D=16,Y=16,X=16", "f32[4096,4096]", "P('D', 'Y')", "P('Y', ('D','X'))", "optimal", 4096, 64, "blocks"},
		{"4096-gather", "D=16,Y=16,X=16", "f32[4096,4096]", "P('D', 'Y')", "P('D', None)", "optimal", 4096, 64, "blocks"},
		{"65536", "x=64,y=32,z=32", "bf16[50176,4096]", "P('x', ('z','y'))", "P(('y','z'), 'x')", "optimal", 65536, 64, "blocks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.devices > 4096 && os.Getenv("SHARDPLAN_LONG") == "" {
				t.Skip("65,536 devices take about 40 s; set SHARDPLAN_LONG=1")
			}
			plan := showReshard(ctx, t, wd, base, tc.mesh, tc.tensor, tc.source, tc.target, tc.strategy, tc.devices)
			require.NotEmpty(t, plan.Steps)
			var mesh struct {
				Mode    string `json:"mode"`
				Items   int    `json:"items"`
				Devices string `json:"devices"`
			}
			wd.scriptJSON(ctx, t, &mesh, `const s = document.querySelector("#mesh-view svg.mesh"); return JSON.stringify({mode: s.dataset.mode, items: +s.dataset.items, devices: s.dataset.devices})`)
			assert.Equal(t, tc.mode, mesh.Mode)
			assert.Equal(t, tc.items, mesh.Items, "devices or groups drawn")
			assert.Equal(t, strconv.Itoa(tc.devices), mesh.Devices)

			// The tensors: every tile of a target split many ways is drawn in its owner's
			// colour, and tiles too narrow for a border have none.
			var tiles struct {
				Tiles, Thin, Stroked int
			}
			wd.scriptJSON(ctx, t, &tiles, `const r = [...document.querySelectorAll("#target-view rect.tile, #target-view rect.tile-cell")];
				return JSON.stringify({Tiles: r.length, Thin: r.filter(x => x.classList.contains("thin")).length,
					Stroked: r.filter(x => x.classList.contains("thin") && getComputedStyle(x).stroke !== "none").length})`)
			assert.Positive(t, tiles.Tiles)
			assert.Zero(t, tiles.Stroked, "thin tiles drawn with a border")

			// Every step: laid out within its panel; a collective's groups are stripes
			// (or outlines) and its moves arrows (or a matrix) that count every move.
			for i, st := range plan.Steps {
				if i > 0 {
					wd.click(ctx, t, wd.waitElement(ctx, t, "#next"))
					wd.waitScript(ctx, t, fmt.Sprintf("step %d drawn", i), `return document.getElementById("plan").dataset.drawn === arguments[0]`, strconv.Itoa(i))
				}
				var drawn struct {
					Arrows, Outlines, Striped, MatrixMoves int
				}
				wd.scriptJSON(ctx, t, &drawn, `const m = document.querySelector("#step-mesh svg.matrix");
					return JSON.stringify({Arrows: document.querySelectorAll("#step-mesh path.arrow").length,
						Outlines: document.querySelectorAll("#step-mesh rect.group-outline").length,
						Striped: [...document.querySelectorAll("#step-mesh g.block")].filter(b => +b.dataset.groups > 0).length,
						MatrixMoves: m ? +m.dataset.moves : 0})`)
				grouped := false
				switch st.Op {
				case "all_gather", "all_to_all", "reduce_scatter", "all_reduce":
					grouped = st.GroupSize > 1
				}
				moves := len(st.moves())
				if tc.mode == "devices" {
					assert.Equal(t, moves, drawn.Arrows, "step %d (%s): arrows", i, st.Op)
					if grouped {
						assert.Equal(t, st.GroupSize*st.GroupCount, drawn.Outlines, "step %d (%s): outlines", i, st.Op)
					}
				} else {
					assert.Zero(t, drawn.Arrows, "step %d (%s): no arrows over groups of devices", i, st.Op)
					assert.Equal(t, moves, drawn.MatrixMoves, "step %d (%s): the matrix counts every move", i, st.Op)
					if grouped {
						assert.Equal(t, tc.items, drawn.Striped, "step %d (%s): every box striped by its groups", i, st.Op)
					} else {
						assert.Zero(t, drawn.Striped, "step %d (%s): stripes without groups", i, st.Op)
					}
				}
				assertLayout(ctx, t, wd, fmt.Sprintf("%s step %d", tc.name, i+1))
				wd.script(ctx, t, `document.getElementById("plan").scrollIntoView({block: "start"})`)
				wd.saveScreenshot(ctx, t, fmt.Sprintf("explore-scale-%s-step-%d.png", tc.name, i+1))
			}
			wd.script(ctx, t, `document.getElementById("mesh-panel").scrollIntoView({block: "start"})`)
			wd.saveScreenshot(ctx, t, "explore-scale-"+tc.name+".png")
			if tc.mode == "devices" {
				return
			}

			// Zoom into the first group: its devices are drawn, the zoom path leads back.
			var first struct {
				First, Span int
			}
			wd.scriptJSON(ctx, t, &first, `const b = document.querySelector('#mesh-view g.block[data-block="0"]'); return JSON.stringify({First: +b.dataset.first, Span: +b.dataset.span})`)
			wd.script(ctx, t, `document.querySelector('#mesh-view g.block[data-block="0"]').dispatchEvent(new MouseEvent("click", {bubbles: true}))`)
			wd.waitScript(ctx, t, "zoomed in", `return document.getElementById("mesh-zoom").querySelectorAll("button").length === 2`)
			var zoomed struct {
				Mode         string
				Items, First int
				Devices      int
			}
			wd.scriptJSON(ctx, t, &zoomed, `const s = document.querySelector("#mesh-view svg.mesh");
				const items = [...s.querySelectorAll("g.device, g.block")];
				return JSON.stringify({Mode: s.dataset.mode, Items: items.length, First: +(items[0].dataset.pos || items[0].dataset.first),
					Devices: items.reduce((n, g) => n + (+g.dataset.span || 1), 0)})`)
			assert.Equal(t, first.First, zoomed.First, "the zoomed view starts at the group's first device")
			assert.Equal(t, first.Span, zoomed.Devices, "the zoomed view holds the group's devices")
			assert.LessOrEqual(t, zoomed.Items, 64)
			assertLayout(ctx, t, wd, tc.name+" zoomed in")
			wd.saveScreenshot(ctx, t, "explore-scale-"+tc.name+"-zoom.png")
			wd.click(ctx, t, wd.waitElement(ctx, t, `#mesh-zoom button[data-depth="0"]`))
			wd.waitScript(ctx, t, "zoomed out", `return document.querySelector("#mesh-view svg.mesh").dataset.items === arguments[0]`, strconv.Itoa(tc.items))
		})
	}

	t.Run("graph", func(t *testing.T) { checkGraphOperands(ctx, t, wd, base) })
	assertSelfContained(ctx, t, wd, base, 5)

	// An error clears the plan drawn before it.
	wd.script(ctx, t, `document.getElementById("target").value = "P('Q')"; document.getElementById("show").click()`)
	wd.waitScript(ctx, t, "error shown", `return document.getElementById("status").className === "bad"`)
	assert.Equal(t, true, wd.script(ctx, t, `return document.getElementById("views").hidden`), "the old plan is hidden")
	assert.EqualValues(t, 0, wd.script(ctx, t, `return document.querySelectorAll("#views svg").length`), "the old plan's drawings are gone")
	assert.Nil(t, wd.script(ctx, t, `return document.getElementById("plan").dataset.planId || null`))
	assert.Empty(t, wd.script(ctx, t, `return [...document.querySelectorAll("#views .copy output")].map(o => o.textContent).join("")`), "no old sharding to copy")

	// A bad module clears the graph drawn before it.
	wd.script(ctx, t, `document.getElementById("module").value = "func.func @main("; document.getElementById("show-graph").click()`)
	wd.waitScript(ctx, t, "graph error", `return document.getElementById("graph-status").className === "bad"`)
	assert.Equal(t, true, wd.script(ctx, t, `return document.getElementById("graph-view").hidden`))
	assert.EqualValues(t, 0, wd.script(ctx, t, `return document.querySelectorAll("#graph-ops tbody tr").length`))
}

// checkGraphOperands: the graph view shows each operand with its own sharding (the
// tensor's, from shardings) and, where the op computes in another, that one after an
// arrow; switching the strategy to xla shows XLA's answer (its remats).
func checkGraphOperands(ctx context.Context, t *testing.T, wd *webDriver, base string) {
	module := wd.script(ctx, t, `return document.getElementById("module").value`).(string)
	for _, strategy := range []string{"optimal", "xla"} {
		var resp struct {
			Shardings map[string]struct {
				PartitionSpec string `json:"partition_spec"`
				Text          string `json:"text"`
			} `json:"shardings"`
			Ops []struct {
				Name           string   `json:"name"`
				OperandTensors []string `json:"operand_tensors"`
				Operands       []struct {
					PartitionSpec string `json:"partition_spec"`
					Text          string `json:"text"`
				} `json:"operands"`
			} `json:"ops"`
			Collectives []struct {
				FullRematerialization bool `json:"full_rematerialization"`
			} `json:"collectives"`
			Summary struct {
				Strategy string `json:"strategy"`
			} `json:"summary"`
		}
		postPlan(t, base+"/v1/graph?include=ops&strategy="+strategy, "application/mlir", module, &resp)
		require.Equal(t, strategy, resp.Summary.Strategy)
		wd.script(ctx, t, `document.getElementById("graph-strategy").value = arguments[0]; document.getElementById("show-graph").click()`, strategy)
		wd.waitScript(ctx, t, "graph drawn", `const v = document.getElementById("graph-view"); return v.dataset.ready === "true" && v.dataset.strategy === arguments[0]`, strategy)
		type cell struct {
			Tensor, Own, Consumed string
		}
		var cells map[string][]cell
		wd.scriptJSON(ctx, t, &cells, `const out = {};
			for (const tr of document.querySelectorAll("#graph-ops tbody tr")) out[tr.dataset.op] = [...tr.querySelectorAll(".operand")].map(o =>
				({Tensor: o.dataset.tensor, Own: o.querySelector(".own").textContent, Consumed: o.querySelector(".consumed") ? o.querySelector(".consumed").textContent : ""}));
			return JSON.stringify(out)`)
		require.NotEmpty(t, resp.Ops)
		differs := 0
		for _, op := range resp.Ops {
			require.Len(t, op.OperandTensors, len(op.Operands), "op %s names its operands", op.Name)
			got := cells[op.Name]
			require.Len(t, got, len(op.Operands), "op %s", op.Name)
			for k, id := range op.OperandTensors {
				own := resp.Shardings[id]
				assert.Equal(t, id, got[k].Tensor)
				assert.Equal(t, own.PartitionSpec, got[k].Own, "op %s operand %s: its own sharding", op.Name, id)
				if own.Text != op.Operands[k].Text {
					differs++
					assert.Equal(t, op.Operands[k].PartitionSpec, got[k].Consumed, "op %s operand %s: as the op computes", op.Name, id)
				} else {
					assert.Empty(t, got[k].Consumed)
				}
			}
		}
		t.Logf("%s: %d operands computed in another sharding than their own", strategy, differs)
		remats := 0
		for _, c := range resp.Collectives {
			if c.FullRematerialization {
				remats++
			}
		}
		shown := wd.script(ctx, t, `return document.querySelectorAll("#graph-collectives li").length`)
		assert.EqualValues(t, len(resp.Collectives), shown)
		status := wd.script(ctx, t, `return document.getElementById("graph-status").textContent`).(string)
		assert.Contains(t, status, "("+strategy+")")
		if remats > 0 {
			assert.Contains(t, status, "full rematerialization")
		}
		wd.script(ctx, t, `document.getElementById("graph-input").scrollIntoView({block: "start"})`)
		wd.saveScreenshot(ctx, t, "explore-graph-"+strategy+".png")
	}
}
