package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/go-chi/chi/v5/middleware"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/sharding"
)

// testBudget is a test server's request deadline unless the test sets its own: generous,
// so that work taking a second on a quiet machine and ten on a loaded one is never a 503
// timeout (the deadline itself is tested with short deadlines the tests set).
const testBudget = 2 * time.Minute

// newTestServer builds a Server with the default limits but for the request deadline
// (testBudget), then applies mod.
func newTestServer(t *testing.T, mod func(*Deps)) *Server {
	t.Helper()
	d := Deps{Limits: DefaultLimits()}
	d.Limits.RequestTimeout = testBudget
	if mod != nil {
		mod(&d)
	}
	s, err := New(d)
	require.NoError(t, err)
	return s
}

type problemBody struct {
	Type     string                `json:"type"`
	Title    string                `json:"title"`
	Status   int                   `json:"status"`
	Detail   string                `json:"detail"`
	Instance string                `json:"instance"`
	Errors   []sharding.FieldError `json:"errors"`
	Checks   map[string]string     `json:"checks"`
}

// do sends a request to s and returns the recorder.
func do(t *testing.T, h http.Handler, method, path, contentType, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequestWithContext(t.Context(), method, path, rd)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// requireProblem checks the RFC 9457 shape of rec and returns the decoded body.
func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, slug string) problemBody {
	t.Helper()
	require.Equal(t, status, rec.Code, "body: %s", rec.Body.String())
	require.Equal(t, ProblemContentType, rec.Header().Get("Content-Type"))
	var p problemBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p), rec.Body.String())
	assert.Equal(t, ProblemTypeBase+slug, p.Type)
	assert.Equal(t, status, p.Status)
	assert.NotEmpty(t, p.Title)
	assert.NotEmpty(t, p.Detail)
	assert.NotEmpty(t, p.Instance)
	assert.Equal(t, rec.Header().Get("X-Request-Id"), p.Instance, "instance is the request id")
	return p
}

func fields(p problemBody) []string {
	out := make([]string, len(p.Errors))
	for i, e := range p.Errors {
		out[i] = e.Field
	}
	return out
}

const seed = `{"mesh":"x=3,y=4","shape":[16,23],"dtype":"f32","sharding":[[0],[1]],"locate":[[13,17]]}`

func TestTilesBadInput(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxBodyBytes = 4096 })
	big := `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[0]],"devices":[` + strings.Repeat("0,", 3000) + `0]}`
	tests := []struct {
		name   string
		ctype  string
		body   string
		status int
		slug   string
		field  string // "" means: no errors array expected to name one
	}{
		{"empty body", "application/json", "", 400, slugInvalidJSON, ""},
		{"malformed", "application/json", `{"mesh": "x=2",`, 400, slugInvalidJSON, ""},
		{"syntax error", "application/json", `{"mesh": x}`, 400, slugInvalidJSON, ""},
		{"trailing data", "application/json", seed + ` {}`, 400, slugInvalidJSON, ""},
		{"not an object", "application/json", `[1,2]`, 400, slugInvalidJSON, ""},
		{"shape element wrong type", "application/json", `{"mesh":"x=2","shape":[4,"a"],"dtype":"f32","sharding":[[0],null]}`, 400, slugInvalidJSON, "shape[1]"},
		{"shape wrong type", "application/json", `{"mesh":"x=2","shape":{"a":1},"dtype":"f32","sharding":[[0]]}`, 400, slugInvalidJSON, "shape"},
		{"locate wrong type", "application/json", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[0]],"locate":[[1],["a"]]}`, 400, slugInvalidJSON, "locate[1][0]"},
		{"unknown field", "application/json", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[0]],"bogus":1}`, 400, slugInvalidRequest, "bogus"},
		{"unknown mesh field", "application/json", `{"mesh":{"axes":[{"name":"x","size":2,"bogus":1}]},"shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugInvalidMesh, "mesh.axes[0].bogus"},
		{"mesh size wrong type", "application/json", `{"mesh":{"axes":[{"name":"x","size":"2"}]},"shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugInvalidMesh, "mesh.axes[0].size"},
		{"missing mesh", "application/json", `{"shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugInvalidRequest, "mesh"},
		{"null mesh", "application/json", `{"mesh":null,"shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugInvalidMesh, "mesh"},
		{"missing shape", "application/json", `{"mesh":"x=2","dtype":"f32","sharding":[[0]]}`, 400, slugInvalidRequest, "shape"},
		{"zero dim", "application/json", `{"mesh":"x=2","shape":[4,0],"dtype":"f32","sharding":[[0],null]}`, 400, slugInvalidRequest, "shape[1]"},
		{"negative dim", "application/json", `{"mesh":"x=2","shape":[-4],"dtype":"f32","sharding":[[0]]}`, 400, slugInvalidRequest, "shape[0]"},
		{"rank over limit", "application/json", `{"mesh":"x=2","shape":[` + strings.TrimSuffix(strings.Repeat("1,", 17), ",") + `],"dtype":"f32","sharding":[]}`, 400, slugLimitExceeded, "shape"},
		{"zero mesh axis", "application/json", `{"mesh":"x=0","shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugInvalidMesh, "mesh"},
		{"negative mesh axis object", "application/json", `{"mesh":{"axes":[{"name":"x","size":-2}]},"shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugInvalidMesh, "mesh.axes[0].size"},
		{"too many devices", "application/json", `{"mesh":"x=1000,y=1000,z=1000","shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugLimitExceeded, "mesh"},
		{"too many devices object", "application/json", `{"mesh":{"axes":[{"name":"x","size":1000000000}]},"shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugLimitExceeded, "mesh"},
		{"too many mesh axes", "application/json", `{"mesh":"a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1","shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, slugLimitExceeded, "mesh"},
		{"unknown dtype", "application/json", `{"mesh":"x=2","shape":[4],"dtype":"f33","sharding":[[0]]}`, 400, slugInvalidRequest, "dtype"},
		{"dtype and element_bytes", "application/json", `{"mesh":"x=2","shape":[4],"dtype":"f32","element_bytes":4,"sharding":[[0]]}`, 400, slugInvalidRequest, "dtype"},
		{"element_bytes zero", "application/json", `{"mesh":"x=2","shape":[4],"element_bytes":0,"sharding":[[0]]}`, 400, slugInvalidRequest, "element_bytes"},
		{"unknown axis array", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":[["q"],null]}`, 400, slugInvalidSharding, "sharding[0][0]"},
		{"unknown axis bare string", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":["q",null]}`, 400, slugInvalidSharding, "sharding[0]"},
		{"unknown axis text", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":"[{\"q\"}, {}]"}`, 400, slugInvalidSharding, "sharding"},
		{"mesh name mismatch", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":"sharding<@other, [{\"x\"}, {}]>"}`, 400, slugInvalidSharding, "sharding"},
		{"unknown axis object", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":{"dims":[{"axes":["q"]},{"axes":[]}]}}`, 400, slugInvalidSharding, "sharding.dims[0].axes[0]"},
		{"duplicate axis", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":[["x"],["x"]]}`, 400, slugInvalidSharding, "sharding[1][0]"},
		{"overlapping sub-axes", "application/json", `{"mesh":"x=4,y=2","shape":[4,4],"dtype":"f32","sharding":[["x:(1)2"],"x"]}`, 400, slugInvalidSharding, "sharding[1]"},
		{"rank mismatch", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":[["x"],null,null]}`, 400, slugInvalidSharding, "sharding"},
		{"locate out of range", "application/json", `{"mesh":"x=2","shape":[4,5],"dtype":"f32","sharding":[[0],null],"locate":[[0,0],[1,5]]}`, 400, slugInvalidRequest, "locate[1][1]"},
		{"locate wrong rank", "application/json", `{"mesh":"x=2","shape":[4,5],"dtype":"f32","sharding":[[0],null],"locate":[[0]]}`, 400, slugInvalidRequest, "locate[0]"},
		{"device out of range", "application/json", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[0]],"devices":[0,2]}`, 400, slugInvalidRequest, "devices[1]"},
		{"wrong content type", "text/plain", seed, 415, slugUnsupportedMedia, ""},
		{"form content type", "application/x-www-form-urlencoded", seed, 415, slugUnsupportedMedia, ""},
		{"body too large", "application/json", big, 413, slugBodyTooLarge, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, "/v1/tiles", tc.ctype, tc.body)
			p := requireProblem(t, rec, tc.status, tc.slug)
			if tc.field != "" {
				assert.Contains(t, fields(p), tc.field, "detail: %s", p.Detail)
				for _, e := range p.Errors {
					assert.NotEmpty(t, e.Message)
				}
			}
		})
	}
}

func TestBodyTooLargeWithoutContentLength(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxBodyBytes = 64 })
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/tiles", io.NopCloser(strings.NewReader(seed)))
	req.ContentLength = -1 // chunked: only MaxBytesReader can catch it
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	p := requireProblem(t, rec, http.StatusRequestEntityTooLarge, slugBodyTooLarge)
	assert.Contains(t, p.Detail, "64 bytes")
	assert.Contains(t, p.Detail, "SHARDPLAN_MAX_BODY_BYTES")
}

func TestTilesSeed(t *testing.T) {
	s := newTestServer(t, nil)
	for _, ctype := range []string{"application/json", "application/json; charset=utf-8", ""} {
		rec := do(t, s, http.MethodPost, "/v1/tiles", ctype, seed)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		var resp TilesResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
		assert.Equal(t, []int64{6, 6}, resp.TileShape)
		assert.Equal(t, int64(144), resp.TileBytes)
		assert.Equal(t, "t[i, j] -> d(i floordiv 6, j floordiv 6)[i mod 6, j mod 6]", resp.Maps.GlobalToDevice)
		require.Len(t, resp.Devices, 12)
		assert.Equal(t, [][2]int64{{12, 16}, {12, 18}}, resp.Devices[10].Ranges)
		assert.Equal(t, []int64{2, 0}, resp.Devices[10].Padding)
		require.Len(t, resp.Locate, 1)
		require.Len(t, resp.Locate[0].Owners, 1)
		o := resp.Locate[0].Owners[0]
		assert.Equal(t, 10, o.Device)
		assert.Equal(t, []int{2, 2}, o.Coords)
		assert.Equal(t, []int64{1, 5}, o.LocalIndex)
		assert.Equal(t, `sharding<@mesh, [{"x"}, {"y"}]>`, resp.Sharding.Text)
		assert.NotContains(t, rec.Body.String(), `\u003c`, "no HTML escaping")
	}
}

func TestTilesDeviceList(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.ListDeviceLimit = 8 })
	tests := []struct {
		name     string
		body     string
		devices  []int
		omitted  bool
		rep      int // owners of the located index
		tileByte int64
	}{
		{"over the limit, none asked", `{"mesh":"x=4,y=4","shape":[8,8],"dtype":"bf16","sharding":[["x"],null],"locate":[[5,5]]}`, nil, true, 4, 2 * 8 * 2},
		{"over the limit, subset asked", `{"mesh":"x=4,y=4","shape":[8,8],"dtype":"bf16","sharding":[["x"],null],"devices":[15,0]}`, []int{15, 0}, false, 0, 32},
		{"under the limit", `{"mesh":"x=2,y=4","shape":[8,8],"element_bytes":1,"sharding":"[{\"x\", \"y\"}, {}]"}`, []int{0, 1, 2, 3, 4, 5, 6, 7}, false, 0, 8},
		{"sub-byte dtype", `{"mesh":"x=2","shape":[3],"dtype":"s4","sharding":[null],"locate":[[2]]}`, []int{0, 1}, false, 2, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, http.MethodPost, "/v1/tiles", "application/json", tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			var resp TilesResponse
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
			var got []int
			for _, d := range resp.Devices {
				got = append(got, d.Device)
			}
			assert.Equal(t, tc.devices, got)
			assert.Equal(t, tc.omitted, resp.DevicesOmitted)
			if tc.omitted {
				assert.Contains(t, resp.Note, "SHARDPLAN_LIST_DEVICE_LIMIT")
			}
			if tc.rep > 0 {
				require.Len(t, resp.Locate, 1)
				assert.Len(t, resp.Locate[0].Owners, tc.rep)
			}
			assert.Equal(t, tc.tileByte, resp.TileBytes)
		})
	}
}

func TestShardingJSON(t *testing.T) {
	m, err := sharding.ParseMeshString("x=2,y=4,z=2,w=2", "mesh")
	require.NoError(t, err)
	s, err := sharding.Parse(json.RawMessage(`"[{\"x\"}, {\"z\", \"y\":(1)2, ?}p1, {?}], replicated={\"w\"}"`), m, []int64{4, 4, 4}, "sharding")
	require.NoError(t, err)
	got := shardingJSON(s, m)
	b, err := encodeJSON(got)
	require.NoError(t, err)
	assert.JSONEq(t, `{"dims":[{"axes":["x"]},{"axes":["z","y:(1)2"],"open":true,"priority":1},{"axes":[],"open":true}],
		"replicated":["w"],"text":"sharding<@mesh, [{\"x\"}, {\"z\", \"y\":(1)2, ?}p1, {?}], replicated={\"w\"}>",
		"hlo":"{devices=[2,4,1,4]<=[2,4,2,2]T(0,2,1,3) last_tile_dim_replicate}"}`, string(b))
	// The canonical object parses back to the same sharding.
	back, err := sharding.Parse(b, m, []int64{4, 4, 4}, "sharding")
	require.NoError(t, err)
	assert.True(t, s.Equal(back))
}

func TestRoutingProblems(t *testing.T) {
	s := newTestServer(t, nil)
	rec := do(t, s, http.MethodGet, "/nope", "", "")
	requireProblem(t, rec, http.StatusNotFound, slugNotFound)

	rec = do(t, s, http.MethodGet, "/v1/tiles", "", "")
	p := requireProblem(t, rec, http.StatusMethodNotAllowed, slugMethodNotAllowed)
	assert.Equal(t, "POST", rec.Header().Get("Allow"))
	assert.Contains(t, p.Detail, "POST")

	rec = do(t, s, http.MethodDelete, "/healthz", "", "")
	requireProblem(t, rec, http.StatusMethodNotAllowed, slugMethodNotAllowed)
	assert.Equal(t, "GET", rec.Header().Get("Allow"))
}

func TestRequestIDEcho(t *testing.T) {
	s := newTestServer(t, nil)
	tests := []struct {
		name, in string
		echoed   bool
	}{
		{"kept", "abc-123", true},
		{"junk replaced", "bad id\x01<script>", false},
		{"too long replaced", strings.Repeat("a", 200), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/nope", nil)
			req.Header.Set("X-Request-Id", tc.in)
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			got := rec.Header().Get("X-Request-Id")
			require.NotEmpty(t, got)
			assert.Equal(t, tc.echoed, got == tc.in)
			p := requireProblem(t, rec, http.StatusNotFound, slugNotFound)
			assert.Equal(t, got, p.Instance)
		})
	}
}

func TestPanicRecovery(t *testing.T) {
	s := newTestServer(t, nil)
	s.router.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("kaboom: secret internal text") })
	rec := do(t, s, http.MethodGet, "/boom", "", "")
	p := requireProblem(t, rec, http.StatusInternalServerError, slugInternal)
	assert.NotContains(t, p.Detail, "kaboom", "internal text is never sent")
}

func TestHandlerErrorKinds(t *testing.T) {
	// Only the deadline case runs under a short deadline, which it waits out: the others
	// answer at once under the default one, whatever the machine's load.
	s := newTestServer(t, nil)
	short := newTestServer(t, func(d *Deps) { d.Limits.RequestTimeout = 20 * time.Millisecond })
	tests := []struct {
		name   string
		h      handlerFunc
		status int
		slug   string
	}{
		{"internal error", func(http.ResponseWriter, *http.Request) error { return errors.New("db password wrong") }, 500, slugInternal},
		{"field errors", func(http.ResponseWriter, *http.Request) error {
			return sharding.Errors{sharding.Fieldf("source[1]", "bad")}
		}, 400, slugInvalidSharding},
		{"mesh field error", func(http.ResponseWriter, *http.Request) error { return sharding.Fieldf("mesh.axes[0].size", "bad") }, 400, slugInvalidMesh},
		{"deadline", func(_ http.ResponseWriter, r *http.Request) error {
			<-r.Context().Done()
			return r.Context().Err()
		}, 503, slugTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := s
			if tc.status == http.StatusServiceUnavailable {
				srv = short
			}
			h := srv.timeout(srv.handle(tc.h))
			rec := do(t, h, http.MethodGet, "/x", "", "")
			// outside the router there is no request id; set one for the shape check
			rec.Header().Set("X-Request-Id", "")
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			var p problemBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
			assert.Equal(t, ProblemTypeBase+tc.slug, p.Type)
			assert.NotContains(t, p.Detail, "password")
			if tc.status == 503 {
				assert.NotEmpty(t, rec.Header().Get("Retry-After"))
				assert.Contains(t, p.Detail, "SHARDPLAN_REQUEST_TIMEOUT")
			}
		})
	}
}

func TestThrottle(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxInflight = 1 })
	entered, release := make(chan struct{}), make(chan struct{})
	h := s.throttle(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/tiles", nil))
		done <- rec.Code
	}()
	<-entered
	rec := do(t, h, http.MethodPost, "/v1/tiles", "", "")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, ProblemContentType, rec.Header().Get("Content-Type"))
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Contains(t, rec.Body.String(), ProblemTypeBase+slugOverloaded)
	close(release)
	assert.Equal(t, http.StatusNoContent, <-done)
}

// TestReadyz: a failing optional check (the cache) is "degraded", still 200; a failing
// required check and draining are 503. A check's error goes only to a key holder; others
// read "unavailable". The metrics follow.
func TestReadyz(t *testing.T) {
	const key = "0123456789abcdef-key"
	var cacheErr, dbErr error
	s := newTestServer(t, func(d *Deps) {
		d.Optional = map[string]Check{"cache": func(context.Context) error { return cacheErr }}
		d.Checks = map[string]Check{"db": func(context.Context) error { return dbErr }}
		d.Access.APIKeys = []string{key}
	})
	get := func(withKey bool) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/readyz", nil)
		if withKey {
			req.Header.Set("X-API-Key", key)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	metric := func(name string) string {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil)
		req.Header.Set("X-API-Key", key)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		for line := range strings.SplitSeq(rec.Body.String(), "\n") {
			if strings.HasPrefix(line, name+" ") {
				return strings.TrimPrefix(line, name+" ")
			}
		}
		return ""
	}
	rec := get(false)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"status":"ready","checks":{"draining":"ok","cache":"ok","db":"ok"}}`, rec.Body.String())
	assert.Equal(t, "0", metric("shardplan_degraded"))

	cacheErr = errors.New("redis ping: dial tcp 10.1.2.3:6379: connect: connection refused")
	rec = get(false)
	require.Equal(t, http.StatusOK, rec.Code, "a cache outage leaves the service answering")
	assert.JSONEq(t, `{"status":"degraded","checks":{"draining":"ok","cache":"unavailable","db":"ok"}}`, rec.Body.String())
	assert.NotContains(t, rec.Body.String(), "10.1.2.3", "no internal address without a key")
	rec = get(true)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), `"cache":"redis ping: dial tcp 10.1.2.3:6379`, "a key holder reads the error")
	assert.Equal(t, "1", metric("shardplan_degraded"))
	assert.Equal(t, "0", metric(`shardplan_readiness_check_up{check="cache"}`))

	dbErr = errors.New("db at 10.9.9.9 down")
	rec = get(false)
	p := requireProblem(t, rec, http.StatusServiceUnavailable, slugNotReady)
	assert.Equal(t, checkUnavailable, p.Checks["db"])
	assert.NotContains(t, rec.Body.String(), "10.9.9.9")
	assert.Equal(t, "0", metric("shardplan_degraded"), "not ready is not degraded")

	cacheErr, dbErr = nil, nil
	s.SetDraining(true)
	p = requireProblem(t, get(false), http.StatusServiceUnavailable, slugNotReady)
	assert.Equal(t, "shutting down", p.Checks["draining"])
	assert.Equal(t, "1", metric(`shardplan_readiness_check_up{check="cache"}`))

	rec = do(t, s, http.MethodGet, "/healthz", "", "")
	assert.Equal(t, http.StatusOK, rec.Code, "liveness does not depend on draining")
}

func TestMetricsByRoutePattern(t *testing.T) {
	s := newTestServer(t, nil)
	do(t, s, http.MethodPost, "/v1/tiles", "application/json", seed)
	do(t, s, http.MethodPost, "/v1/tiles", "text/plain", seed)
	do(t, s, http.MethodGet, "/nope/123", "", "")
	rec := do(t, s, http.MethodGet, "/metrics", "", "")
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	assert.Contains(t, body, `shardplan_http_requests_total{method="POST",route="/v1/tiles",status="200"} 1`)
	assert.Contains(t, body, `shardplan_http_requests_total{method="POST",route="/v1/tiles",status="415"} 1`)
	assert.Contains(t, body, `shardplan_http_requests_total{method="GET",route="unmatched",status="404"} 1`)
	assert.Contains(t, body, `shardplan_http_request_duration_seconds_count{method="POST",route="/v1/tiles"} 2`)
	assert.NotContains(t, body, "/nope/123", "raw paths never become labels")
	assert.NotContains(t, body, "shardplan_plan_duration_seconds_count", "no planning yet")

	// Each reshard planned (this server memoizes nothing) is one observation, by strategy.
	reshard := `{"mesh": "x=2,y=2", "shape": [8, 8], "dtype": "f32", "source": ["x", "y"], "target": ["y", "x"]%s}`
	for _, extra := range []string{"", "", `, "strategy": "xla"`} {
		require.Equal(t, http.StatusOK, do(t, s, http.MethodPost, "/v1/reshard", "application/json", fmt.Sprintf(reshard, extra)).Code)
	}
	body = do(t, s, http.MethodGet, "/metrics", "", "").Body.String()
	assert.Contains(t, body, `shardplan_plan_duration_seconds_count{endpoint="reshard",strategy="optimal"} 2`)
	assert.Contains(t, body, `shardplan_plan_duration_seconds_count{endpoint="reshard",strategy="xla"} 1`)
}

type fakeMemo struct{ store map[string][]byte }

func (f *fakeMemo) Do(ctx context.Context, key string, compute func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	if b, ok := f.store[key]; ok {
		return b, true, nil
	}
	b, err := compute(ctx)
	if err == nil {
		f.store[key] = b
	}
	return b, false, err
}

func TestValidationMessages(t *testing.T) {
	type inner struct {
		Name string `json:"name" validate:"required,max=3"`
	}
	type req struct {
		Strategy string   `json:"strategy" validate:"omitempty,oneof=optimal xla"`
		Items    []inner  `json:"items" validate:"required,min=1,dive"`
		Sizes    []int    `json:"sizes" validate:"dive,gte=1,lte=8"`
		Skip     string   `json:"-"`
		Tags     []string `json:"tags" validate:"max=1"`
	}
	s := newTestServer(t, nil)
	err := s.validateStruct(&req{Strategy: "fast", Items: []inner{{}, {Name: "toolong"}}, Sizes: []int{1, 0, 9}, Tags: []string{"a", "b"}})
	var p *Problem
	require.ErrorAs(t, err, &p)
	got := map[string]string{}
	for _, e := range p.Errors {
		got[e.Field] = e.Message
	}
	assert.Equal(t, map[string]string{
		"strategy":      `must be one of: optimal xla (got "fast")`,
		"items[0].name": "is required",
		"items[1].name": `must be at most 3 characters long (got "toolong")`,
		"sizes[1]":      "must be >= 1 (got 0)",
		"sizes[2]":      "must be <= 8 (got 9)",
		"tags":          "must have at most 1 entries (it has 2)",
	}, got)
	assert.Equal(t, 400, p.Status)
}

func TestPathAt(t *testing.T) {
	body := []byte(`{"a": [1, {"b": [true, "x"]}], "c": {"d": 5}}`)
	tests := []struct {
		after string // the value whose end we point at
		want  string
	}{
		{`1`, "a[0]"},
		{`true`, "a[1].b[0]"},
		{`"x"`, "a[1].b[1]"},
		{`5`, "c.d"},
	}
	for _, tc := range tests {
		off := int64(strings.Index(string(body), tc.after) + len(tc.after))
		assert.Equal(t, tc.want, pathAt(body, off), tc.after)
	}
}

func TestOpenAPIServed(t *testing.T) {
	s := newTestServer(t, func(d *Deps) {
		d.OpenAPI = []byte(`{"swagger":"2.0"}`)
		d.OpenAPI3 = []byte(`{"openapi":"3.0.3"}`)
	})
	for path, want := range map[string]string{
		"/openapi.json":  `{"openapi":"3.0.3"}`,
		"/openapi3.json": `{"openapi":"3.0.3"}`,
		"/openapi2.json": `{"swagger":"2.0"}`,
	} {
		rec := do(t, s, http.MethodGet, path, "", "")
		require.Equal(t, http.StatusOK, rec.Code, path)
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"), path)
		assert.JSONEq(t, want, rec.Body.String(), path)
	}
	rec := do(t, s, http.MethodGet, "/docs", "", "")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "openapi.json")
	assert.Contains(t, string(docsAppJS), `"openapi2.json"`, "the docs page reads the Swagger 2.0 document")
}

// TestDegradedFollowsTheChecksWithoutReadyz: the readiness gauges follow the checks at
// each scrape, whether or not anyone asks /readyz.
func TestDegradedFollowsTheChecksWithoutReadyz(t *testing.T) {
	var cacheErr, dbErr error
	s := newTestServer(t, func(d *Deps) {
		d.Optional = map[string]Check{"cache": func(context.Context) error { return cacheErr }}
		d.Checks = map[string]Check{"db": func(context.Context) error { return dbErr }}
	})
	scrape := func() string { return do(t, s.Metrics(), http.MethodGet, "/metrics", "", "").Body.String() }
	down := errors.New("redis ping: connection refused")
	tests := []struct {
		name              string
		cache, db         error
		draining          bool
		degraded, cacheUp string
	}{
		{name: "all up", degraded: "0", cacheUp: "1"},
		{name: "cache down", cache: down, degraded: "1", cacheUp: "0"},
		{name: "cache back", degraded: "0", cacheUp: "1"},
		{name: "cache and a required check down: not ready, not degraded", cache: down, db: down, degraded: "0", cacheUp: "0"},
		{name: "cache down while draining: not degraded", cache: down, draining: true, degraded: "0", cacheUp: "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cacheErr, dbErr = tc.cache, tc.db
			s.SetDraining(tc.draining)
			body := scrape()
			assert.Contains(t, body, "\nshardplan_degraded "+tc.degraded+"\n")
			assert.Contains(t, body, "\nshardplan_readiness_check_up{check=\"cache\"} "+tc.cacheUp+"\n")
		})
	}
}

// TestCancelledWorkAnswers: work that ends with its request's cancellation answers 503
// shutting-down while the server drains (the shutdown timeout cancelled it, wherever the
// request was: computing, or waiting for a slot in a middleware), and 499 without a body
// otherwise (the client left); a cancellation of other work is an internal error.
func TestCancelledWorkAnswers(t *testing.T) {
	tests := []struct {
		name      string
		draining  bool
		cancelled bool // the request's context
		err       error
		status    int
		slug      string
	}{
		{name: "draining", draining: true, cancelled: true, err: context.Canceled, status: http.StatusServiceUnavailable, slug: slugShuttingDown},
		{name: "draining, wrapped", draining: true, cancelled: true, err: fmt.Errorf("waiting for a slot: %w", context.Canceled), status: http.StatusServiceUnavailable, slug: slugShuttingDown},
		{name: "the client left", cancelled: true, err: context.Canceled, status: 499},
		{name: "not the request's cancellation", err: context.Canceled, status: http.StatusInternalServerError, slug: slugInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, nil)
			s.SetDraining(tc.draining)
			ctx, cancel := context.WithCancel(t.Context())
			if tc.cancelled {
				cancel()
			} else {
				defer cancel()
			}
			req := httptest.NewRequestWithContext(context.WithValue(ctx, middleware.RequestIDKey, "test-000001"), http.MethodPost, "/v1/tiles", nil)
			rec := httptest.NewRecorder()
			rec.Header().Set("X-Request-Id", "test-000001")
			s.writeProblem(rec, req, tc.err)
			if tc.slug == "" {
				assert.Equal(t, tc.status, rec.Code)
				assert.Empty(t, rec.Body.String())
				return
			}
			requireProblem(t, rec, tc.status, tc.slug)
		})
	}
}
