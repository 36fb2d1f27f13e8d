package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireBrowser skips the test when Chromium or ChromeDriver is missing, except under
// CI=true, where it fails.
func requireBrowser(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	for _, bin := range []string{chromiumPath, chromedriverPath} {
		if _, err := os.Stat(bin); err != nil {
			msg := fmt.Sprintf("%s missing (install Debian's chromium chromium-driver: scripts/ci/chromium.sh): %v", bin, err)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// openInBrowser starts the server and a headless Chromium, and opens path in it.
func openInBrowser(t *testing.T, path string, timeout time.Duration) (context.Context, string, *webDriver) {
	t.Helper()
	requireBrowser(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	base, _, _, _ := startServer(t, nil)
	wd := startWebDriver(ctx, t)
	t.Cleanup(func() {
		if t.Failed() {
			wd.diagnose(t)
		}
	})
	require.NoError(t, wd.post(ctx, "/url", map[string]string{"url": base + path}, nil))
	return ctx, base, wd
}

// assertSelfContained checks that every resource the page fetched (at least min) came
// from the server and that the console logged no error (CSP violations, failed loads).
func assertSelfContained(ctx context.Context, t *testing.T, wd *webDriver, base string, min int) {
	t.Helper()
	var urls []string
	wd.scriptJSON(ctx, t, &urls, `return JSON.stringify([location.href].concat(performance.getEntriesByType("resource").map(e => e.name)))`)
	assert.GreaterOrEqual(t, len(urls), min, "page, script, stylesheet and what it fetched: %v", urls)
	for _, u := range urls {
		assert.True(t, strings.HasPrefix(u, base+"/"), "request outside the server: %s", u)
	}
	for _, entry := range wd.browserLog(ctx, t) {
		assert.NotEqual(t, "SEVERE", entry.Level, "console: %s", entry.Message)
	}
}

// artifactPath is where a test writes its artifact name: $SHARDPLAN_ARTIFACTS, else a
// temporary directory.
func artifactPath(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("SHARDPLAN_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return filepath.Join(dir, name)
}

func (wd *webDriver) saveScreenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	path := artifactPath(t, name)
	require.NoError(t, os.WriteFile(path, wd.screenshot(ctx, t), 0o644))
	t.Logf("screenshot: %s", path)
}

// hover moves the pointer onto an element's centre (WebDriver actions).
func (wd *webDriver) hover(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	actions := map[string]any{"actions": []any{map[string]any{
		"type": "pointer", "id": "mouse", "parameters": map[string]string{"pointerType": "mouse"},
		"actions": []any{map[string]any{"type": "pointerMove", "duration": 0, "x": 0, "y": 0, "origin": map[string]string{w3cElementKey: id}}},
	}}}
	require.NoError(t, wd.post(ctx, "/actions", actions, nil))
}

// scriptJSON runs script, which returns JSON.stringify(...), and decodes it into out.
func (wd *webDriver) scriptJSON(ctx context.Context, t *testing.T, out any, script string, args ...any) {
	t.Helper()
	raw, ok := wd.script(ctx, t, script, args...).(string)
	require.True(t, ok, "script did not return a string: %s", script)
	require.NoError(t, json.Unmarshal([]byte(raw), out), raw)
}

// postPlan posts body to the server and decodes the JSON answer.
func postPlan(t *testing.T, url, contentType, body string, out any) {
	t.Helper()
	resp, raw := send(t, http.MethodPost, url, contentType, strings.NewReader(body))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.NoError(t, json.Unmarshal(raw, out))
}

type browserTile struct {
	Device int        `json:"device"`
	Ranges [][2]int64 `json:"ranges"`
}

type browserStep struct {
	Op        string   `json:"op"`
	Pairs     [][2]int `json:"pairs"`
	Transfers []struct {
		From int `json:"from"`
		To   int `json:"to"`
	} `json:"transfers"`
	GroupSize  int `json:"group_size"`
	GroupCount int `json:"group_count"`
	PairRuns   []struct {
		From     int `json:"from"`
		To       int `json:"to"`
		FromStep int `json:"from_step"`
		ToStep   int `json:"to_step"`
		Count    int `json:"count"`
	} `json:"pair_runs"`
	TransferRuns []struct {
		First struct {
			From int `json:"from"`
			To   int `json:"to"`
		} `json:"first"`
		Step struct {
			From int `json:"from"`
			To   int `json:"to"`
		} `json:"step"`
		Count int `json:"count"`
	} `json:"transfer_runs"`
}

// moves are a step's [from, to] pairs and transfers without self moves, as "from>to".
func (s browserStep) moves() []string {
	seen := map[string]bool{}
	var out []string
	add := func(from, to int) {
		k := strconv.Itoa(from) + ">" + strconv.Itoa(to)
		if from != to && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, p := range s.Pairs {
		add(p[0], p[1])
	}
	for _, tr := range s.Transfers {
		add(tr.From, tr.To)
	}
	for _, r := range s.PairRuns {
		for i := range r.Count {
			add(r.From+i*r.FromStep, r.To+i*r.ToStep)
		}
	}
	for _, r := range s.TransferRuns {
		for i := range r.Count {
			add(r.First.From+i*r.Step.From, r.First.To+i*r.Step.To)
		}
	}
	sort.Strings(out)
	return out
}

// TestExplorerInBrowser drives GET /explore in headless Chromium against the real server:
// the default example draws every device, the source and target tensors coloured by the
// owners /v1/tiles names, a hovered tile shows its ranges; the plan of another example is
// stepped through (and played) and each step's arrows are the plan's pairs; a module's
// reshard is stepped through from the graph view. Screenshots go to $SHARDPLAN_ARTIFACTS.
func TestExplorerInBrowser(t *testing.T) {
	ctx, base, wd := openInBrowser(t, "/explore", 120*time.Second)

	// The default example: seed 003's case 1 pasted as JAX and Shardy print it.
	explicit := `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"], "cost_model": "tpu-v5p", "include": ["pairs"]}`
	var plan struct {
		PlanID string        `json:"plan_id"`
		Steps  []browserStep `json:"steps"`
	}
	postPlan(t, base+"/v1/reshard", "application/json", explicit, &plan)
	wd.waitScript(ctx, t, "first plan drawn", `const p = document.getElementById("plan"); return p.dataset.ready === "true" && p.dataset.drawn === "0"`)
	assert.Equal(t, plan.PlanID, wd.script(ctx, t, `return document.getElementById("plan").dataset.planId`),
		"the printed forms on the page make the same canonical request as the explicit one")

	// The mesh: 8 devices, ids 0..7.
	var ids []int
	wd.scriptJSON(ctx, t, &ids, `return JSON.stringify([...document.querySelectorAll("#mesh-view svg.mesh g.device")].map(g => +g.dataset.device))`)
	sort.Ints(ids)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, ids)

	// Tiles: every device /v1/tiles lists is drawn at its ranges, in its owner's colour
	// (the lowest id of the devices holding those ranges), one colour per owner.
	type pageTile struct {
		Devices string     `json:"devices"`
		Owner   int        `json:"owner"`
		Ranges  [][2]int64 `json:"ranges"`
		Fill    string     `json:"fill"`
	}
	for role, sh := range map[string]string{"source": `["X", null]`, "target": `["Y", "X"]`} {
		var tiles struct {
			Devices []browserTile `json:"devices"`
		}
		postPlan(t, base+"/v1/tiles", "application/json", `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "sharding": `+sh+`}`, &tiles)
		var drawn []pageTile
		wd.scriptJSON(ctx, t, &drawn, `return JSON.stringify([...document.querySelectorAll("#" + arguments[0] + "-view rect.tile")].map(r =>
			({devices: r.dataset.devices, owner: +r.dataset.owner, ranges: JSON.parse(r.dataset.ranges), fill: r.getAttribute("fill")})))`, role)
		owners := map[string][]int{} // ranges -> devices, from /v1/tiles
		for _, d := range tiles.Devices {
			k := fmt.Sprint(d.Ranges)
			owners[k] = append(owners[k], d.Device)
		}
		require.Len(t, drawn, len(owners), "%s: one rectangle per distinct tile", role)
		colours := map[string]int{}
		for _, r := range drawn {
			want := owners[fmt.Sprint(r.Ranges)]
			require.NotEmpty(t, want, "%s: a drawn tile at %v that /v1/tiles does not list", role, r.Ranges)
			sort.Ints(want)
			got := strings.Fields(r.Devices)
			assert.Equal(t, fmt.Sprint(want), "["+strings.Join(got, " ")+"]", "%s: devices of the tile at %v", role, r.Ranges)
			assert.Equal(t, want[0], r.Owner, "%s: the owner is the lowest id", role)
			if prev, ok := colours[r.Fill]; ok {
				assert.Equal(t, prev, r.Owner, "%s: colour %s used for two owners", role, r.Fill)
			}
			colours[r.Fill] = r.Owner
		}
		// The same owner has the same colour in both drawings.
		for fill, owner := range colours {
			n := wd.script(ctx, t, `return [...document.querySelectorAll('#source-view rect.tile, #target-view rect.tile')].filter(r => +r.dataset.owner === arguments[0] && r.getAttribute("fill") !== arguments[1]).length`, owner, fill)
			assert.EqualValues(t, 0, n, "owner %d drawn in another colour than %s", owner, fill)
		}
	}
	wd.script(ctx, t, `document.getElementById("mesh-panel").scrollIntoView({block: "start"})`)
	wd.saveScreenshot(ctx, t, "explore-tiles.png")

	// Hover a target tile: the tip names the device and its ranges.
	tile := wd.waitElement(ctx, t, `#target-view rect.tile[data-devices="5"]`)
	wd.hover(ctx, t, tile)
	wd.waitScript(ctx, t, "tip shown", `const t = document.getElementById("tip"); return !t.hidden && t.dataset.devices === "5"`)
	tip := wd.text(ctx, t, wd.waitElement(ctx, t, "#tip"))
	assert.Contains(t, tip, "device 5")
	assert.Contains(t, tip, "dim 0 [512, 1024)")
	assert.Contains(t, tip, "dim 1 [1024, 2048)")
	assert.Equal(t, []any{"5"}, wd.script(ctx, t, `return [...document.querySelectorAll("#mesh-view rect.lit")].map(r => r.parentNode.dataset.device)`),
		"the hovered tile's owner is lit in the mesh")
	wd.saveScreenshot(ctx, t, "explore-hover.png")

	// Another example: XLA's plan of the same reshard (a slice, then collective_permute
	// pairs), pasted as an HLO dump prints it.
	xla := `{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"], "cost_model": "tpu-v5p",
		"allowed_ops": ["slice", "all_gather", "all_to_all", "collective_permute"], "include": ["pairs"]}`
	plan.Steps = nil // a fresh decode: Unmarshal would keep fields of the old steps
	postPlan(t, base+"/v1/reshard", "application/json", xla, &plan)
	require.GreaterOrEqual(t, len(plan.Steps), 2)
	wd.click(ctx, t, wd.waitElement(ctx, t, `#example option[value="xla-pairs"]`))
	wd.waitScript(ctx, t, "xla plan drawn", `const p = document.getElementById("plan"); return p.dataset.ready === "true" && p.dataset.planId === arguments[0]`, plan.PlanID)
	checkSteps(ctx, t, wd, plan.Steps, "explore-step")

	// Play from the first step to the last.
	wd.click(ctx, t, wd.waitElement(ctx, t, "#first"))
	wd.waitScript(ctx, t, "back at step 1", `return document.getElementById("plan").dataset.drawn === "0"`)
	wd.click(ctx, t, wd.waitElement(ctx, t, "#play"))
	last := strconv.Itoa(len(plan.Steps) - 1)
	wd.waitScript(ctx, t, "played to the last step", `return document.getElementById("plan").dataset.drawn === arguments[0] && document.getElementById("play").textContent.includes("play")`, last)

	// Copy as: the target in every form, DTensor placements included.
	wd.script(ctx, t, `const s = document.querySelector('.copy[data-for="target"] select'); s.value = "DTensor placements"; s.dispatchEvent(new Event("change"))`)
	assert.Equal(t, "(Shard(dim=1), Shard(dim=0))",
		wd.script(ctx, t, `return document.querySelector('.copy[data-for="target"] output').textContent`))
	wd.script(ctx, t, `const s = document.querySelector('.copy[data-for="target"] select'); s.value = "HloSharding"; s.dispatchEvent(new Event("change"))`)
	assert.Equal(t, "{devices=[4,2]<=[2,4]T(1,0)}", wd.script(ctx, t, `return document.querySelector('.copy[data-for="target"] output').textContent`))

	// A module: its reshard is stepped through from the graph view.
	var graph struct {
		Collectives []struct {
			Kind string `json:"kind"`
			Plan *struct {
				Steps []browserStep `json:"steps"`
			} `json:"plan"`
		} `json:"collectives"`
	}
	module := wd.script(ctx, t, `return document.getElementById("module").value`).(string)
	postPlan(t, base+"/v1/graph", "application/mlir", module, &graph)
	reshard := -1
	for i, c := range graph.Collectives {
		if c.Kind == "reshard" && c.Plan != nil && len(c.Plan.Steps) > 0 {
			reshard = i
			break
		}
	}
	require.GreaterOrEqual(t, reshard, 0, "the example module has a reshard")
	wd.click(ctx, t, wd.waitElement(ctx, t, "#show-graph"))
	wd.waitScript(ctx, t, "graph drawn", `return document.getElementById("graph-view").dataset.ready === "true"`)
	rows := wd.script(ctx, t, `return document.querySelectorAll("#graph-tensors tbody tr").length`)
	assert.EqualValues(t, 6, rows, "arg0, arg1, arg2, 0, 1 and result0")
	var withOps struct {
		Ops []struct {
			Name string `json:"name"`
		} `json:"ops"`
	}
	postPlan(t, base+"/v1/graph?include=ops", "application/mlir", module, &withOps)
	var opRows []string
	wd.scriptJSON(ctx, t, &opRows, `return JSON.stringify([...document.querySelectorAll("#graph-ops tbody tr")].map(r => r.dataset.op))`)
	var opNames []string
	for _, op := range withOps.Ops {
		opNames = append(opNames, op.Name)
	}
	assert.Equal(t, opNames, opRows, "the op list is the answer's")
	wd.script(ctx, t, `document.getElementById("graph-input").scrollIntoView({block: "start"})`)
	wd.saveScreenshot(ctx, t, "explore-graph.png")
	wd.click(ctx, t, wd.waitElement(ctx, t, fmt.Sprintf(`#graph-collectives li[data-index="%d"]`, reshard)))
	wd.waitScript(ctx, t, "graph reshard drawn", `const p = document.getElementById("plan"); return p.dataset.ready === "true" && p.dataset.steps === arguments[0]`,
		strconv.Itoa(len(graph.Collectives[reshard].Plan.Steps)))
	checkSteps(ctx, t, wd, graph.Collectives[reshard].Plan.Steps, "explore-graph-step")

	// Everything the page fetched came from the server; the console has no errors.
	assertSelfContained(ctx, t, wd, base, 5)
}

// checkSteps steps through a drawn plan with the next button: each step's arrows are its
// pairs and transfers, and its group outlines cover every member of its groups.
func checkSteps(ctx context.Context, t *testing.T, wd *webDriver, steps []browserStep, shot string) {
	t.Helper()
	wd.click(ctx, t, wd.waitElement(ctx, t, "#first"))
	for i, st := range steps {
		if i > 0 {
			wd.click(ctx, t, wd.waitElement(ctx, t, "#next"))
		}
		wd.waitScript(ctx, t, fmt.Sprintf("step %d drawn", i), `return document.getElementById("plan").dataset.drawn === arguments[0]`, strconv.Itoa(i))
		var arrows []string
		wd.scriptJSON(ctx, t, &arrows, `return JSON.stringify([...document.querySelectorAll("#step-mesh path.arrow")].map(a => a.dataset.from + ">" + a.dataset.to))`)
		sort.Strings(arrows)
		want := st.moves()
		if want == nil {
			want = []string{}
		}
		assert.Equal(t, want, arrows, "step %d (%s): arrows", i, st.Op)
		members := 0
		switch st.Op {
		case "all_gather", "all_to_all", "reduce_scatter", "all_reduce":
			members = st.GroupSize * st.GroupCount
		}
		assert.EqualValues(t, members, wd.script(ctx, t, `return document.querySelectorAll("#step-mesh rect.group-outline").length`), "step %d (%s): group outlines", i, st.Op)
		assert.EqualValues(t, 8, wd.script(ctx, t, `return document.querySelectorAll("#step-mesh g.device").length`))
		wd.script(ctx, t, `document.getElementById("plan").scrollIntoView({block: "start"})`)
		wd.saveScreenshot(ctx, t, fmt.Sprintf("%s-%d.png", shot, i+1))
	}
}
