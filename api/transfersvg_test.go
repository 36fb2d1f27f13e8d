package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/testgen"
)

// svgRect is the box an element of a drawing covers, in the drawing's coordinates.
type svgRect struct{ x0, y0, x1, y1 float64 }

func (a svgRect) overlap(b svgRect) float64 {
	w := min(a.x1, b.x1) - max(a.x0, b.x0)
	h := min(a.y1, b.y1) - max(a.y0, b.y0)
	if w <= 0 || h <= 0 {
		return 0
	}
	return w * h
}

// TestTransferSVGAtScale: the drawing of transfers on 256 GPUs (32 nodes of 8) keeps
// every text and every flow inside its viewBox, its labels apart from one another and
// drawn over the flows, one flow per pair of nodes that network bytes join (their bytes
// adding up to the answer's network bytes), and stays under 512 KB.
func TestTransferSVGAtScale(t *testing.T) {
	s := newTestServer(t, nil)
	cases := []struct {
		name string
		body []byte
	}{
		{"trainer of 128 to 16 replicas of 8", testgen.TransferRequestJSON("h100", 256,
			testgen.At("trainer", "fsdp=16,tp=8", 0), testgen.Replicas("tp=8", 16, 8, 128), testgen.Llama3_8B.Tensors())},
		{"trainer of 256 to 32 colocated replicas of 8", testgen.TransferRequestJSON("h100", 256,
			testgen.At("trainer", "fsdp=32,tp=8", 0), testgen.Replicas("tp=8", 32, 8, 0), testgen.Llama3_8B.Tensors())},
		{"trainer of 64 to 8 replicas of 24", testgen.TransferRequestJSON("h100", 256,
			testgen.At("trainer", "fsdp=8,tp=8", 0), testgen.Replicas("pp=3,tp=8", 8, 24, 64), testgen.Llama3_8B.Tensors())},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := postTransfer(t, s, tc.body, "image/svg+xml")
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Less(t, rec.Body.Len(), svgMaxBytes, "under 512 KB")
			jrec := postTransfer(t, s, tc.body, "application/json")
			require.Equal(t, http.StatusOK, jrec.Code, jrec.Body.String())
			var js TransferResponse
			require.NoError(t, json.Unmarshal(jrec.Body.Bytes(), &js))

			nodes := parseSVGTree(t, rec.Body.Bytes())
			root := nodes[0]
			require.Equal(t, "svg", root.name)
			var vx, vy, vw, vh float64
			_, err := fmt.Sscanf(root.attrs["viewBox"], "%g %g %g %g", &vx, &vy, &vw, &vh)
			require.NoError(t, err)
			view := svgRect{vx, vy, vx + vw, vy + vh}
			inside := func(r svgRect) bool {
				return r.x0 >= view.x0 && r.y0 >= view.y0 && r.x1 <= view.x1 && r.y1 <= view.y1
			}
			var labels []svgRect
			var names []string
			flows, lastFlow, firstLabel := 0, -1, -1
			var flowBytes int64
			devices := 0
			for i, n := range nodes {
				switch {
				case n.name == "text":
					size := 11.0
					if f, ok := n.attrs["font-size"]; ok {
						size, _ = strconv.ParseFloat(f, 64)
					}
					x, y := attrF(t, n.attrs, "x"), attrF(t, n.attrs, "y")
					w := textWidth(n.text, size)
					switch n.attrs["text-anchor"] {
					case "middle":
						x -= w / 2
					case "end":
						x -= w
					}
					r := svgRect{x, y - size, x + w, y + size*0.3}
					assert.True(t, inside(r), "text %q at %v inside the viewBox %v", n.text, r, view)
					labels = append(labels, r)
					names = append(names, n.text)
					if n.attrs["class"] == "node-label" && firstLabel < 0 {
						firstLabel = i
					}
				case n.attrs["class"] == "flow":
					flows++
					lastFlow = i
					b, err := strconv.ParseInt(n.attrs["data-bytes"], 10, 64)
					require.NoError(t, err)
					flowBytes += b
					var x1, y1, cx, cy, x2, y2 float64
					_, err = fmt.Sscanf(n.attrs["d"], "M %g %g Q %g %g %g %g", &x1, &y1, &cx, &cy, &x2, &y2)
					require.NoError(t, err, n.attrs["d"])
					// A quadratic curve lies inside the hull of its three points.
					pad := attrF(t, n.attrs, "stroke-width") / 2
					for _, p := range [][2]float64{{x1, y1}, {cx, cy}, {x2, y2}} {
						assert.True(t, inside(svgRect{p[0] - pad, p[1] - pad, p[0] + pad, p[1] + pad}), "flow %s point %v inside the viewBox %v", n.attrs["d"], p, view)
					}
				case n.attrs["class"] == "device":
					devices++
					x, y := attrF(t, n.attrs, "x"), attrF(t, n.attrs, "y")
					assert.True(t, inside(svgRect{x, y, x + attrF(t, n.attrs, "width"), y + attrF(t, n.attrs, "height")}), "device %s inside", n.attrs["data-device"])
				}
			}
			assert.Equal(t, 256, devices)
			assert.Positive(t, flows, "network flows drawn")
			assert.InDelta(t, js.Summary.NetworkBytes, flowBytes, float64(flows), "the flows carry the network bytes")
			assert.Greater(t, firstLabel, lastFlow, "node labels drawn over the flows")
			for i := range labels {
				for j := i + 1; j < len(labels); j++ {
					assert.LessOrEqual(t, labels[i].overlap(labels[j]), 4.0, "labels %q and %q overlap", names[i], names[j])
				}
			}
			count := 0
			for _, name := range names {
				if strings.HasPrefix(name, "node ") {
					count++
				}
			}
			assert.Equal(t, 32, count, "every node labelled")
		})
	}
}
