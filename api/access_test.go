package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCORS(t *testing.T) {
	s := newTestServer(t, func(d *Deps) {
		d.Access = Access{CORSOrigins: []string{"https://docs.example"}, APIKeys: []string{"sk-cors-test-0123456789"}}
	})
	req := func(method, origin string, headers map[string]string, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(t.Context(), method, "/v1/reshard", strings.NewReader(body))
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		for k, v := range headers {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		return rec
	}
	t.Run("preflight from an allowed origin", func(t *testing.T) {
		rec := req(http.MethodOptions, "https://docs.example", map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, authorization"}, "")
		require.Equal(t, http.StatusNoContent, rec.Code, "answered before routing and without a key")
		assert.Equal(t, "https://docs.example", rec.Header().Get("Access-Control-Allow-Origin"))
		assert.Contains(t, rec.Header().Get("Access-Control-Allow-Methods"), "POST")
		assert.Contains(t, rec.Header().Get("Access-Control-Allow-Headers"), "Authorization")
		assert.Contains(t, rec.Header().Values("Vary"), "Origin")
	})
	t.Run("request from an allowed origin", func(t *testing.T) {
		rec := req(http.MethodPost, "https://docs.example", map[string]string{"Authorization": "Bearer sk-cors-test-0123456789", "Content-Type": "application/json"}, planReq)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assert.Equal(t, "https://docs.example", rec.Header().Get("Access-Control-Allow-Origin"))
		assert.Contains(t, rec.Header().Get("Access-Control-Expose-Headers"), "X-Cache")
	})
	t.Run("a 401 is readable by an allowed origin", func(t *testing.T) {
		rec := req(http.MethodPost, "https://docs.example", nil, planReq)
		requireProblem(t, rec, http.StatusUnauthorized, slugUnauthorized)
		assert.Equal(t, "https://docs.example", rec.Header().Get("Access-Control-Allow-Origin"))
	})
	t.Run("other origins get no CORS headers", func(t *testing.T) {
		rec := req(http.MethodOptions, "https://evil.example", map[string]string{"Access-Control-Request-Method": "POST"}, "")
		assert.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
		assert.NotEqual(t, http.StatusNoContent, rec.Code)
	})
	t.Run("off by default", func(t *testing.T) {
		open := newTestServer(t, nil)
		r := httptest.NewRequestWithContext(t.Context(), http.MethodOptions, "/v1/reshard", nil)
		r.Header.Set("Origin", "https://docs.example")
		r.Header.Set("Access-Control-Request-Method", "POST")
		rec := httptest.NewRecorder()
		open.ServeHTTP(rec, r)
		assert.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
	})
}

func TestKeyHashesMatch(t *testing.T) {
	h := newKeyHashes([]string{"sk-one-0123456789abcdef", "sk-two-0123456789abcdef"})
	for key, want := range map[string]bool{
		"sk-one-0123456789abcdef":  true,
		"sk-two-0123456789abcdef":  true,
		"sk-one-0123456789abcde":   false,
		"sk-one-0123456789abcdefX": false,
		"":                         false,
	} {
		assert.Equal(t, want, h.match(key), "%q", key)
	}
	assert.False(t, keyHashes(nil).match(""), "no keys match nothing")
}

// TestFailedKeysAreRateLimited: wrong keys count against the address's bucket.
func TestFailedKeysAreRateLimited(t *testing.T) {
	s := newTestServer(t, func(d *Deps) {
		d.Access.APIKeys = []string{"sk-right-0123456789abcdef"}
		d.Limits.RateLimit, d.Limits.RateBurst = 0.1, 3
	})
	var codes []int
	for i := range 5 {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/tiles", strings.NewReader(seed))
		r.RemoteAddr = "198.51.100.7:4000"
		r.Header.Set("X-API-Key", "sk-guess-000000000000000"+itoa(i))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		codes = append(codes, rec.Code)
	}
	assert.Equal(t, []int{401, 401, 401, 429, 429}, codes)
}
