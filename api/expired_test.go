package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestExpiredRequestsFreeTheirSlots sends the slot-hogging requests with a context that
// ends once the request holds its compute slot, or has already ended (the deadline
// passed, or the client left): each returns, and no compute or in-flight slot is left
// taken. The hop table of a 65,536-device axis ran for
// minutes whatever its context said; the go test deadline is this test's only clock.
func TestExpiredRequestsFreeTheirSlots(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Limits.MaxGraphBodyBytes = 32 << 20 })
	var ts, ops []string
	for k := range 5000 {
		ts = append(ts, fmt.Sprintf(`"t%d":{"shape":[4,8],"dtype":"f32","sharding":[["x"],null]}`, k))
		ops = append(ops, fmt.Sprintf(`"t%d"`, k))
	}
	bodies := []struct{ path, body string }{
		{"/v1/reshard", `{"mesh":"x=65536","shape":[65536],"dtype":"f32","source":[["x"]],"target":[null]}`},
		{"/v1/graph", `{"mesh":"x=2","tensors":{` + strings.Join(ts, ",") + `,"out":{"shape":[20000,8],"dtype":"f32"}},"ops":[{"name":"c","op":"concatenate","operands":[` + strings.Join(ops, ",") + `],"results":["out"],"attrs":{"dimension":0}}]}`},
		{"/v1/tiles", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[` + strings.TrimSuffix(strings.Repeat(`"x",`, 100000), ",") + `]]}`},
	}
	for _, b := range bodies {
		// Cancelled once its work holds a compute slot (the event, not a clock).
		ctx, cancel := context.WithCancel(t.Context())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, b.path, strings.NewReader(b.body))
		req.Header.Set("Content-Type", "application/json")
		served := make(chan struct{})
		go func() {
			defer close(served)
			s.ServeHTTP(httptest.NewRecorder(), req)
		}()
		go func() {
			for len(s.compute) == 0 {
				select {
				case <-served:
					return
				default:
					runtime.Gosched()
				}
			}
			cancel()
		}()
		<-served
		cancel()
		assert.Zero(t, len(s.compute), "cancelled while computing %s: compute slots taken after the answer", b.path)
		assert.Zero(t, len(s.inflight), "cancelled while computing %s: in-flight slots taken after the answer", b.path)

		for _, name := range []string{"cancelled", "deadline passed"} {
			ctx, cancel := context.WithCancel(t.Context())
			if name == "deadline passed" {
				ctx, cancel = context.WithDeadline(t.Context(), time.Unix(0, 0))
			}
			cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, b.path, strings.NewReader(b.body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			assert.Zero(t, len(s.compute), "%s %s: compute slots taken after the answer", name, b.path)
			assert.Zero(t, len(s.inflight), "%s %s: in-flight slots taken after the answer", name, b.path)
		}
	}
}
