package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkTilesHTTP measures POST /v1/tiles through the whole router (decode, validate,
// parse, tiles, encode) on meshes of 256 and 65,536 devices.
func BenchmarkTilesHTTP(b *testing.B) {
	cases := []struct {
		name, body string
	}{
		{"256dev_all", `{"mesh":"x=16,y=16","shape":[4096,4096],"dtype":"bf16","sharding":[["x"],["y"]],"locate":[[13,17]]}`},
		{"65536dev_omitted", `{"mesh":"x=256,y=256","shape":[65536,65536],"dtype":"bf16","sharding":[["x"],["y"]],"locate":[[13,17]]}`},
		{"65536dev_all", `{"mesh":"x=256,y=256","shape":[65536,65536],"dtype":"bf16","sharding":[["x"],["y"]]}`},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			s, err := New(Deps{Limits: func() Limits {
				l := DefaultLimits()
				if strings.HasSuffix(tc.name, "_all") {
					l.ListDeviceLimit = 1 << 20
				}
				l.MaxBodyBytes = 1 << 20
				return l
			}()})
			require.NoError(b, err)
			req := func() *http.Request {
				r := httptest.NewRequest(http.MethodPost, "/v1/tiles", strings.NewReader(tc.body))
				r.Header.Set("Content-Type", "application/json")
				return r
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req())
			require.Equal(b, http.StatusOK, rec.Code, rec.Body.String())
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, req())
			}
		})
	}
}
