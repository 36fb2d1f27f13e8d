package api

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// svgMaxBytes bounds the drawing of a reshard on 4,096 devices.
const svgMaxBytes = 512 << 10

// reshards4096 are reshards on 4,096 devices: a transpose of a 64 x 64 mesh's axes and a
// move of one axis of 4,096 from rows to columns; axes names, per role, the axes of the
// rows and columns of its tensor views.
var reshards4096 = []struct {
	name, body string
	axes       map[string][2]string
}{
	{"x=64,y=64 transpose", `{"mesh": "x=64,y=64", "shape": [65536, 65536], "dtype": "bf16", "source": ["x", "y"], "target": ["y", "x"], "cost_model": "tpu-v5p"}`,
		map[string][2]string{"source": {"x", "y"}, "target": {"y", "x"}}},
	{"d=4096 rows to columns", `{"mesh": "d=4096", "shape": [65536, 65536], "dtype": "bf16", "source": ["d", null], "target": [null, "d"], "cost_model": "h100"}`,
		map[string][2]string{"source": {"d", ""}, "target": {"", "d"}}},
}

// axisRangeRE reads one axis of a box label: "x 8..15" or "x 3".
var axisRangeRE = regexp.MustCompile(`^([A-Za-z_]\w*) (\d+)(?:\.\.(\d+))?$`)

// TestReshardSVG4096GroupedByAxis: on 4,096 devices the SVG stays under 512 KB and its
// tensor views are boxes of tiles grouped by axis, each labelled with the axes of its
// rows and columns and their coordinate ranges; each box sits where those coordinates'
// tiles are, is coloured by the lowest device holding one (checked against every mesh
// position), and the boxes together hold every tile and device once.
func TestReshardSVG4096GroupedByAxis(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tc := range reshards4096 {
		t.Run(tc.name, func(t *testing.T) {
			rec := postAccept(t, s, "/v1/reshard", "image/svg+xml", tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Less(t, rec.Body.Len(), svgMaxBytes, "the drawing stays under 512 KB")
			rec2 := postAccept(t, s, "/v1/reshard", "application/json", tc.body)
			require.Equal(t, http.StatusOK, rec2.Code)
			var js ReshardResponse
			require.NoError(t, json.Unmarshal(rec2.Body.Bytes(), &js))
			axes := make([]sharding.Axis, len(js.Mesh.Axes))
			for i, a := range js.Mesh.Axes {
				axes[i] = sharding.Axis{Name: a.Name, Size: a.Size}
			}
			m, err := sharding.NewMesh(js.Mesh.Name, axes, js.Mesh.DeviceIDs)
			require.NoError(t, err)
			require.Equal(t, 4096, m.NumDevices())

			elems := parseSVG(t, rec.Body.Bytes())
			type box struct {
				attrs, rect map[string]string
				texts       []string
			}
			boxes := map[string][]*box{}
			for _, e := range elems {
				if e.class == "tile" {
					t.Errorf("%s: a tile drawn one by one", e.role)
				}
			}
			nodes := parseSVGTree(t, rec.Body.Bytes())
			var texts []string
			for _, n := range nodes {
				if n.name == "text" {
					texts = append(texts, n.text)
				}
				if n.attrs["class"] != "tile-group" {
					continue
				}
				b := &box{attrs: n.attrs}
				for _, c := range n.children {
					switch c.name {
					case "rect":
						b.rect = c.attrs
					case "text":
						b.texts = append(b.texts, c.text)
					}
				}
				role := ""
				for p := n.parent; p != nil; p = p.parent {
					if r, ok := p.attrs["data-role"]; ok {
						role = r
						break
					}
				}
				boxes[role] = append(boxes[role], b)
			}
			for _, role := range []string{"source", "target"} {
				want := tc.axes[role]
				bs := boxes[role]
				require.NotEmpty(t, bs, role)
				assert.LessOrEqual(t, len(bs), svgAxisGroups*svgAxisGroups, "%s: at most 8 x 8 boxes", role)
				tiles, devices, area := 0, 0, 0.0
				for _, b := range bs {
					label := b.attrs["data-label"]
					nt, _ := strconv.Atoi(b.attrs["data-tiles"])
					nd, _ := strconv.Atoi(b.attrs["data-devices"])
					tiles, devices = tiles+nt, devices+nd
					x, y := attrF(t, b.rect, "x"), attrF(t, b.rect, "y")
					w, h := attrF(t, b.rect, "width"), attrF(t, b.rect, "height")
					area += w * h
					// Every axis of the label is the rows' or the columns' axis, with a
					// range; the box spans that range of the tensor.
					ranges := map[string][2]int{}
					var seen []string
					for _, part := range strings.Split(label, ", ") {
						g := axisRangeRE.FindStringSubmatch(part)
						require.NotNil(t, g, "%s: label %q names an axis and its range", role, label)
						lo, _ := strconv.Atoi(g[2])
						hi := lo
						if g[3] != "" {
							hi, _ = strconv.Atoi(g[3])
						}
						ranges[g[1]] = [2]int{lo, hi}
						seen = append(seen, g[1])
						size := m.Axes[m.AxisIndex(g[1])].Size
						from, to := float64(lo)/float64(size)*svgGroupedPx, float64(hi+1)/float64(size)*svgGroupedPx
						switch g[1] {
						case want[0]:
							assert.InDelta(t, from, y, 0.01, "%s %q: top", role, label)
							assert.InDelta(t, to-from, h, 0.01, "%s %q: height", role, label)
						case want[1]:
							assert.InDelta(t, from, x, 0.01, "%s %q: left", role, label)
							assert.InDelta(t, to-from, w, 0.01, "%s %q: width", role, label)
						default:
							t.Errorf("%s: label %q names axis %s, not the rows' (%s) nor the columns' (%s)", role, label, g[1], want[0], want[1])
						}
					}
					var named []string
					for _, a := range want {
						if a != "" {
							named = append(named, a)
						}
					}
					assert.Equal(t, named, seen, "%s %q: the rows' axis, then the columns'", role, label)
					// The oracle: the lowest device at a mesh position inside the ranges.
					lowest := -1
					coords := make([]int, len(m.Axes))
					for p := range m.NumDevices() {
						coords = m.Coords(p, coords[:0])
						in := true
						for k, a := range m.Axes {
							if r, ok := ranges[a.Name]; ok && (coords[k] < r[0] || coords[k] > r[1]) {
								in = false
							}
						}
						if id := m.DeviceAt(p); in && (lowest < 0 || id < lowest) {
							lowest = id
						}
					}
					assert.Equal(t, strconv.Itoa(lowest), b.attrs["data-owner"], "%s %q: owner", role, label)
					assert.Equal(t, deviceColor(lowest), b.rect["fill"], "%s %q: colour", role, label)
					// The label is written in the box, across or down.
					assert.Equal(t, strings.Split(label, ", "), b.texts, "%s %q: written in the box", role, label)
				}
				assert.Equal(t, 4096, tiles, "%s: every tile in one box", role)
				assert.Equal(t, 4096, devices, "%s: every device in one box", role)
				assert.InDelta(t, svgGroupedPx*svgGroupedPx, area, 1, "%s: the boxes cover the tensor", role)
			}
			assert.Contains(t, texts, "4096 tiles on 4096 devices, drawn by axis: one box per axis group, coloured by its lowest device")
			// The matrix of a step counts every move, a run of equal cells once per pair.
			for i, st := range js.Steps {
				moves, got := len(stepMoves(st)), 0
				for _, e := range elems {
					if e.class == "move-cell" && e.step == strconv.Itoa(i) {
						k, _ := strconv.Atoi(e.attrs["data-moves"])
						a, _ := strconv.Atoi(e.attrs["data-to-block"])
						b, _ := strconv.Atoi(e.attrs["data-to-last"])
						got += k * (b - a + 1)
					}
				}
				assert.Equal(t, moves, got, "step %d (%s): the matrix cells count every move", i, st.Op)
			}
		})
	}
}

func attrF(t *testing.T, attrs map[string]string, name string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(attrs[name], 64)
	require.NoError(t, err, "%s=%q", name, attrs[name])
	return f
}

// BenchmarkReshardSVG4096 times drawing the SVG of the 4,096-device reshards from their
// JSON answers (planned once, before the timer).
//
//	go test -run '^$' -bench BenchmarkReshardSVG4096 -benchmem ./api/
func BenchmarkReshardSVG4096(b *testing.B) {
	d := Deps{Limits: DefaultLimits()}
	d.Limits.RequestTimeout = testBudget
	s, err := New(d)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range reshards4096 {
		req := httptest.NewRequest(http.MethodPost, "/v1/reshard", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Body.String())
		}
		var resp ReshardResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			size := 0
			for b.Loop() {
				body, err := reshardSVG(&resp)
				if err != nil {
					b.Fatal(err)
				}
				size = len(body)
			}
			b.ReportMetric(float64(size), "svg-bytes")
		})
	}
}

// svgNode is an element of an SVG with its text, its parent and its children.
type svgNode struct {
	name     string
	attrs    map[string]string
	text     string
	parent   *svgNode
	children []*svgNode
}

// parseSVGTree lists the elements of a well-formed SVG in document order, as a tree.
func parseSVGTree(t *testing.T, body []byte) []*svgNode {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(body)))
	var out []*svgNode
	var cur *svgNode
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "well-formed XML")
		switch tt := tok.(type) {
		case xml.StartElement:
			n := &svgNode{name: tt.Name.Local, attrs: map[string]string{}, parent: cur}
			for _, a := range tt.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			if cur != nil {
				cur.children = append(cur.children, n)
			}
			out = append(out, n)
			cur = n
		case xml.CharData:
			if cur != nil {
				cur.text += string(tt)
			}
		case xml.EndElement:
			cur = cur.parent
		}
	}
	return out
}

// TestReshardSVGGroupedShapes: tensors of rank 1 and 3, a prime axis longer than the
// groups and a dim an axis does not divide are drawn by axis groups too: well-formed,
// under 512 KB, each box labelled by axes and ranges (or "whole tensor" when nothing is
// sharded), the boxes holding every shown tile once.
func TestReshardSVGGroupedShapes(t *testing.T) {
	s := newTestServer(t, nil)
	cases := []struct {
		name, body string
		shown      [2]int // source, target: devices holding a tile at index 0 of the dims not drawn
	}{
		{"rank 1 prime axis", `{"mesh": "p=1031", "shape": [4096], "dtype": "f32", "source": ["p"], "target": [null]}`, [2]int{1031, 1031}},
		{"rank 3", `{"mesh": "a=2,b=32,c=32", "tensor": "bf16[8,1024,1024]", "source": "P('a', 'b', 'c')", "target": "P(None, 'c', 'b')"}`, [2]int{1024, 2048}},
		{"uneven", `{"mesh": "x=64,y=32", "shape": [1000, 999], "dtype": "f32", "source": ["x", "y"], "target": [["y", "x"], null]}`, [2]int{2048, 2048}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := postAccept(t, s, "/v1/reshard", "image/svg+xml", tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Less(t, rec.Body.Len(), svgMaxBytes)
			devices := map[string]int{}
			for _, e := range parseSVG(t, rec.Body.Bytes()) {
				if e.class != "tile-group" {
					continue
				}
				n, _ := strconv.Atoi(e.attrs["data-devices"])
				devices[e.role] += n
				label := e.attrs["data-label"]
				if label == "whole tensor" {
					continue
				}
				for _, part := range strings.Split(label, ", ") {
					assert.Regexp(t, `^([A-Za-z_]\w*(:\(\d+\)\d+)? \d+(\.\.\d+)? ?)+$`, part, "label %q", label)
				}
			}
			assert.Equal(t, tc.shown[0], devices["source"], "source")
			assert.Equal(t, tc.shown[1], devices["target"], "target")
		})
	}
}
