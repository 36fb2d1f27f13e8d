package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cache"
)

// BenchmarkReshardCachedHit measures a POST /v1/reshard answered from the in-process plan
// cache through the whole router (decode, validate, parse, key, lookup, write), beside
// GET /healthz, the floor of the same router and middleware.
func BenchmarkReshardCachedHit(b *testing.B) {
	c, err := cache.Open(cache.Config{}, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	s, err := New(Deps{Memo: c})
	require.NoError(b, err)
	body := `{"mesh":"x=2,y=4","shape":[2048,2048],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/reshard", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		return rec
	}
	require.Equal(b, http.StatusOK, post().Code)
	require.Eventually(b, func() bool { return post().Header().Get("X-Cache") == "hit" }, 5e9, 1e6)
	b.Run("reshard_hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			post()
		}
	})
	b.Run("healthz", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		}
	})
}
