package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/testgen"
)

// BenchmarkAuditVsGraph posts the transformer (48 and 476 layers: about 1k and 10k ops)
// to /v1/audit and to /v1/graph under each strategy, without a cache: the audit plans
// what the graph plans (under strategy optimal it also predicts XLA's plan of every
// distinct reshard), then ranks the sites and computes the memory timeline.
func BenchmarkAuditVsGraph(b *testing.B) {
	lim := DefaultLimits()
	lim.RequestTimeout = 5 * time.Minute
	s, err := New(Deps{Limits: lim})
	require.NoError(b, err)
	for _, layers := range []int{48, 476} {
		for _, strategy := range []string{"xla", "optimal"} {
			body := `{"strategy":"` + strategy + `",` + strings.TrimPrefix(testgen.TransformerGraphJSON(layers), "{")
			for _, path := range []string{"/v1/graph", "/v1/audit"} {
				// The answer is right before it is timed: the audit lists a site per collective.
				rec := postBench(s, path, body)
				require.Equal(b, http.StatusOK, rec.Code, "%.300s", rec.Body.String())
				b.Run(fmt.Sprintf("layers=%d/strategy=%s/%s", layers, strategy, strings.TrimPrefix(path, "/v1/")), func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					for b.Loop() {
						if rec := postBench(s, path, body); rec.Code != http.StatusOK {
							b.Fatalf("%d: %.300s", rec.Code, rec.Body.String())
						}
					}
				})
			}
		}
	}
}

func postBench(s http.Handler, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	return rec
}
