package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAcceptQuality(t *testing.T) {
	cases := []struct {
		accept, mt string
		want       float64
	}{
		{"", "application/json", 1},
		{"*/*", "image/svg+xml", 1},
		{"application/json", "image/svg+xml", 0},
		{"image/*;q=0.5, application/json", "image/svg+xml", 0.5},
		{"image/svg+xml;q=0, */*", "image/svg+xml", 0},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "application/json", 0.8},
		{"garbage, application/json", "application/json", 1},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, acceptQuality(c.accept, c.mt), "%q %s", c.accept, c.mt)
	}
	assert.Equal(t, "application/json", preferred("*/*", "application/json", svgMediaType))
	assert.Equal(t, svgMediaType, preferred("image/svg+xml, application/json;q=0.5", "application/json", svgMediaType))
	assert.Equal(t, "", preferred("image/png", "application/json", svgMediaType))
}

// Every endpoint answers what Accept admits or a 406 naming what it offers.
func TestEveryEndpointHonoursAccept(t *testing.T) {
	s := newTestServer(t, func(d *Deps) {
		d.OpenAPI = []byte(`{"swagger":"2.0"}`)
		d.OpenAPI3 = []byte(`{"openapi":"3.0.3"}`)
	})
	tiles := `{"mesh": "x=2", "shape": [4], "dtype": "f32", "sharding": ["x"]}`
	reshard := `{"mesh": "x=2", "shape": [4], "dtype": "f32", "source": ["x"], "target": [null]}`
	graph := `{"mesh": "x=2", "tensors": {"a": {"shape": [4], "sharding": ["x"]}, "b": {"shape": [4]}}, "ops": [{"name": "n", "op": "negate", "operands": ["a"], "results": ["b"]}], "inputs": ["a"], "outputs": ["b"]}`
	routes := []struct {
		method, path, body string
		offers             []string
	}{
		{http.MethodGet, "/healthz", "", []string{"application/json"}},
		{http.MethodGet, "/readyz", "", []string{"application/json"}},
		{http.MethodGet, "/openapi.json", "", []string{"application/json"}},
		{http.MethodGet, "/openapi2.json", "", []string{"application/json"}},
		{http.MethodGet, "/docs", "", []string{"text/html"}},
		{http.MethodGet, "/explore", "", []string{"text/html"}},
		{http.MethodGet, "/explore/explore.js", "", []string{"text/javascript"}},
		{http.MethodGet, "/docs/style.css", "", []string{"text/css"}},
		{http.MethodGet, "/metrics", "", []string{"text/plain"}},
		{http.MethodGet, "/v1/cost-models", "", []string{"application/json"}},
		{http.MethodGet, "/v1/cost-models/h100", "", []string{"application/json"}},
		{http.MethodPost, "/v1/tiles", tiles, []string{"application/json", "image/svg+xml"}},
		{http.MethodPost, "/v1/reshard", reshard, []string{"application/json", "text/plain", "image/svg+xml"}},
		{http.MethodPost, "/v1/graph", graph, []string{"application/json"}},
	}
	send := func(method, path, body, accept string) *httptest.ResponseRecorder {
		var req *http.Request
		if body != "" {
			req = httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
		} else {
			req = httptest.NewRequestWithContext(t.Context(), method, path, nil)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	for _, r := range routes {
		rec := send(r.method, r.path, r.body, "image/png")
		p := requireProblem(t, rec, http.StatusNotAcceptable, "not-acceptable")
		assert.Contains(t, p.Detail, r.offers[0], r.path)
		for _, mt := range r.offers {
			rec := send(r.method, r.path, r.body, mt)
			require.Equal(t, http.StatusOK, rec.Code, "%s %s Accept %s: %s", r.method, r.path, mt, rec.Body.String())
			assert.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), mt), "%s Accept %s: Content-Type %s", r.path, mt, rec.Header().Get("Content-Type"))
		}
		rec = send(r.method, r.path, r.body, "*/*")
		require.Equal(t, http.StatusOK, rec.Code, r.path)
		assert.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), r.offers[0]), "%s */*: %s", r.path, rec.Header().Get("Content-Type"))
	}
}
