package api

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// svgElem is an element of an SVG answer with its attributes and the data-role,
// data-step of the groups around it.
type svgElem struct {
	name  string
	attrs map[string]string
	class string
	role  string // data-role of the enclosing tensor, "" outside
	step  string // data-step of the enclosing step, "" outside
}

// parseSVG checks that body is well-formed XML with an <svg> root and lists its elements.
func parseSVG(t *testing.T, body []byte) []svgElem {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(body)))
	var out []svgElem
	var stack []svgElem
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "well-formed XML")
		switch tt := tok.(type) {
		case xml.StartElement:
			e := svgElem{name: tt.Name.Local, attrs: map[string]string{}}
			if root == "" {
				root = tt.Name.Local
				require.Equal(t, "http://www.w3.org/2000/svg", tt.Name.Space)
			}
			for _, a := range tt.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			e.class = e.attrs["class"]
			if n := len(stack); n > 0 {
				e.role, e.step = stack[n-1].role, stack[n-1].step
			}
			if r, ok := e.attrs["data-role"]; ok {
				e.role = r
			}
			if s, ok := e.attrs["data-step"]; ok {
				e.step = s
			}
			stack = append(stack, e)
			out = append(out, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	require.Equal(t, "svg", root)
	require.Empty(t, stack, "every element closed")
	return out
}

func postAccept(t *testing.T, s http.Handler, path, accept, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// The SVG of /v1/tiles has one device per mesh device and one tile rectangle per device
// of the JSON answer, with its ranges and colour.
func TestTilesSVGMatchesJSON(t *testing.T) {
	s := newTestServer(t, nil)
	for _, body := range []string{
		`{"mesh": "x=3,y=4", "shape": [16, 23], "dtype": "f32", "sharding": [[0], [1]]}`,
		`{"mesh": "DeviceMesh('cuda', [[0, 2], [1, 3]], mesh_dim_names=('dp', 'tp'))", "tensor": "f32[8]", "sharding": "(Shard(dim=0), Replicate())"}`,
		`{"mesh": "a=2,b=2,c=2", "tensor": "bf16[4,6]", "sharding": "P(('c', 'a'))"}`,
	} {
		rec := postAccept(t, s, "/v1/tiles", "application/json", body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var js TilesResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &js))
		rec = postAccept(t, s, "/v1/tiles", "image/svg+xml", body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "image/svg+xml; charset=utf-8", rec.Header().Get("Content-Type"))
		elems := parseSVG(t, rec.Body.Bytes())

		devices := map[string]bool{}
		tiles := map[string]svgElem{}
		top := map[string]string{} // ranges -> the device drawn last (on top)
		for _, e := range elems {
			switch e.class {
			case "device":
				devices[e.attrs["data-device"]] = true
			case "tile":
				tiles[e.attrs["data-device"]] = e
				top[e.attrs["data-ranges"]] = e.attrs["data-device"]
			}
		}
		lowest := map[string]int{}
		for _, d := range js.Devices {
			k := jsonText(d.Ranges)
			if v, ok := lowest[k]; !ok || d.Device < v {
				lowest[k] = d.Device
			}
		}
		for k, id := range top {
			assert.Equal(t, strconv.Itoa(lowest[k]), id, "the lowest owner of %s is drawn on top", k)
		}
		n := 1
		for _, a := range js.Mesh.Axes {
			n *= a.Size
		}
		require.Len(t, devices, n, body)
		require.Len(t, tiles, len(js.Devices), body)
		for _, d := range js.Devices {
			id := strconv.Itoa(d.Device)
			require.True(t, devices[id], "device %s drawn", id)
			e, ok := tiles[id]
			require.True(t, ok, "tile of device %s", id)
			assert.JSONEq(t, jsonText(d.Ranges), e.attrs["data-ranges"])
			assert.Equal(t, deviceColor(d.Device), e.attrs["fill"])
		}
	}
}

// The SVG of /v1/reshard draws the source and target tiles of the JSON answer and, for
// every step, one arrow per (from, to) of its pairs or transfers and an outline per
// member of its collective groups.
func TestReshardSVGMatchesJSON(t *testing.T) {
	s := newTestServer(t, nil)
	for _, body := range []string{
		`{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"], "include": ["tiles"]}`,
		`{"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", null], "target": ["Y", "X"], "include": ["tiles"],
		  "allowed_ops": ["slice", "all_gather", "all_to_all", "collective_permute"]}`,
		`{"mesh": "a=2,b=2,c=2", "tensor": "bf16[4,16,12]", "source": "P('a', 'b', 'c')", "target": "P(None, ('c', 'a'), 'b')", "include": ["tiles"]}`,
		`{"mesh": "x=2,y=4", "tensor": "f32[1024]", "source": "P(('x', 'y'))", "target": "P('y')", "include": ["tiles"]}`,
	} {
		rec := postAccept(t, s, "/v1/reshard", "application/json", body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var js ReshardResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &js))
		rec = postAccept(t, s, "/v1/reshard", "image/svg+xml", body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "image/svg+xml; charset=utf-8", rec.Header().Get("Content-Type"))
		elems := parseSVG(t, rec.Body.Bytes())

		axes := make([]sharding.Axis, len(js.Mesh.Axes))
		for i, a := range js.Mesh.Axes {
			axes[i] = sharding.Axis{Name: a.Name, Size: a.Size}
		}
		m, err := sharding.NewMesh(js.Mesh.Name, axes, js.Mesh.DeviceIDs)
		require.NoError(t, err)

		tiles := map[string]map[string]string{"source": {}, "target": {}}
		arrows := map[string][]string{}
		outlines := map[string]int{}
		stepMeshes := map[string]int{}
		for _, e := range elems {
			switch {
			case e.class == "tile":
				tiles[e.role][e.attrs["data-device"]] = e.attrs["data-ranges"]
			case e.class == "arrow":
				arrows[e.step] = append(arrows[e.step], e.attrs["data-from"]+">"+e.attrs["data-to"])
			case e.class == "group-outline":
				outlines[e.step]++
			case e.class == "device" && e.step != "":
				stepMeshes[e.step]++
			}
		}
		for role, want := range map[string][]DeviceTile{"source": js.Tiles.Source, "target": js.Tiles.Target} {
			shown := 0
			for _, d := range want {
				if len(d.Ranges) >= 3 && d.Ranges[0][0] != 0 {
					continue // rank 3: the drawing holds the tiles at index 0 of dim 0
				}
				shown++
				assert.JSONEq(t, jsonText(d.Ranges), tiles[role][strconv.Itoa(d.Device)], "%s tile of %d", role, d.Device)
			}
			assert.Len(t, tiles[role], shown, role)
		}
		require.Len(t, stepMeshes, len(js.Steps))
		for i, st := range js.Steps {
			k := strconv.Itoa(i)
			assert.Equal(t, m.NumDevices(), stepMeshes[k], "step %d draws every device", i)
			var want []string
			seen := map[string]bool{}
			add := func(from, to int) {
				key := strconv.Itoa(from) + ">" + strconv.Itoa(to)
				if from != to && !seen[key] {
					seen[key] = true
					want = append(want, key)
				}
			}
			for _, p := range st.Pairs {
				add(p[0], p[1])
			}
			for _, tr := range st.Transfers {
				add(tr.From, tr.To)
			}
			got := arrows[k]
			sort.Strings(want)
			sort.Strings(got)
			assert.Equal(t, want, got, "step %d (%s) arrows", i, st.Op)
			members := 0
			if st.Op == "all_gather" || st.Op == "all_to_all" || st.Op == "reduce_scatter" || st.Op == "all_reduce" {
				members = st.GroupSize * st.GroupCount
			}
			assert.Equal(t, members, outlines[k], "step %d (%s) group outlines", i, st.Op)
		}
	}
}

func TestSVGLimits(t *testing.T) {
	s := newTestServer(t, nil)
	rec := postAccept(t, s, "/v1/tiles", "image/svg+xml", `{"mesh": "x=2048", "shape": [4096], "dtype": "f32", "sharding": ["x"]}`)
	p := requireProblem(t, rec, http.StatusBadRequest, "limit-exceeded")
	assert.Contains(t, p.Errors[0].Message, "SVG")
	rec = postAccept(t, s, "/v1/reshard", "image/svg+xml", `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["q"], "target": [null]}`)
	requireProblem(t, rec, http.StatusBadRequest, "invalid-sharding")
}

// The SVG of a reshard on 256 and 4,096 devices draws each mesh by axes (64 boxes of
// devices, not every device), a collective's groups as stripes in every box and the
// point-to-point moves as a matrix counting every move of the JSON answer, no arrow; its
// width stays that of a page's panel, and tiles too thin for a border have none.
func TestReshardSVGAtScale(t *testing.T) {
	s := newTestServer(t, nil)
	cases := []struct {
		name, body string
		boxes      int
	}{
		{"256 optimal", `{"mesh": "C=1,D=2,Y=8,X=4,T=4", "tensor": "f32[2048,2048]", "source": "P('D', ('X','Y'))", "target": "P(None, ('D','Y','X','T'))", "include": ["pairs"]}`, 64},
		{"256 xla", `{"mesh": "C=1,D=2,Y=8,X=4,T=4", "tensor": "f32[2048,2048]", "source": "P('D', ('X','Y'))", "target": "P(None, ('D','Y','X','T'))", "strategy": "xla", "include": ["pairs"]}`, 64},
		{"4096 gather", `{"mesh": "D=16,Y=16,X=16", "tensor": "f32[4096,4096]", "source": "P('D', 'Y')", "target": "P('D', None)", "include": ["pairs"]}`, 64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := postAccept(t, s, "/v1/reshard", "application/json", tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			var js ReshardResponse
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &js))
			rec = postAccept(t, s, "/v1/reshard", "image/svg+xml", tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			elems := parseSVG(t, rec.Body.Bytes())
			width, err := strconv.ParseFloat(elems[0].attrs["width"], 64)
			require.NoError(t, err)
			assert.LessOrEqual(t, width, 1200.0, "the drawing fits a page's panel")

			boxes, bands, arrows, devices := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
			matrix := map[string]int{}
			thinStroked := 0
			for _, e := range elems {
				switch e.class {
				case "block":
					boxes[e.step]++
				case "bands":
					bands[e.step]++
				case "arrow":
					arrows[e.step]++
				case "device":
					devices[e.step]++
				case "matrix":
					matrix[e.step], _ = strconv.Atoi(e.attrs["data-moves"])
				case "tile":
					w, _ := strconv.ParseFloat(e.attrs["width"], 64)
					if _, ok := e.attrs["stroke"]; ok && w < 6 {
						thinStroked++
					}
				}
			}
			assert.Zero(t, thinStroked, "thin tiles drawn with a border")
			for i, st := range js.Steps {
				k := strconv.Itoa(i)
				assert.Equal(t, tc.boxes, boxes[k], "step %d: boxes", i)
				assert.Zero(t, devices[k], "step %d: no device drawn one by one", i)
				assert.Zero(t, arrows[k], "step %d: no arrows", i)
				moves := len(stepMoves(st))
				assert.Equal(t, moves, matrix[k], "step %d (%s): the matrix counts every move", i, st.Op)
				if st.Op == "all_gather" || st.Op == "all_to_all" || st.Op == "reduce_scatter" || st.Op == "all_reduce" {
					assert.Equal(t, tc.boxes, bands[k], "step %d (%s): every box striped", i, st.Op)
				} else {
					assert.Zero(t, bands[k], "step %d (%s): no stripes", i, st.Op)
				}
			}
		})
	}
}
