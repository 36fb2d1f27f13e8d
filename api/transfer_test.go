package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/testgen"
)

// llama70B is the 70B model from FSDP=32 x TP=8 on devices 0..255 to 16 replicas of
// TP=8 on devices 256..383 (disjoint) or, colocated, 32 replicas on 0..255.
func llama70B(colocated bool) []byte {
	src := testgen.At("trainer", "fsdp=32,tp=8", 0)
	if colocated {
		return testgen.TransferRequestJSON("h100", 256, src, testgen.Replicas("tp=8", 32, 8, 0), testgen.Llama3_70B.Tensors())
	}
	return testgen.TransferRequestJSON("h100", 384, src, testgen.Replicas("tp=8", 16, 8, 256), testgen.Llama3_70B.Tensors())
}

func postTransfer(t testing.TB, s http.Handler, body []byte, accept string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/transfer", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

func TestTransferLlama70B(t *testing.T) {
	s := newTestServer(t, nil)
	for _, colocated := range []bool{false, true} {
		rec := postTransfer(t, s, llama70B(colocated), "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var resp TransferResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
		sm := resp.Summary
		t.Logf("colocated=%v %s", colocated, TransferText(&resp))
		assert.GreaterOrEqual(t, sm.TimeUS, sm.TimeLowerBoundUS)
		assert.LessOrEqual(t, sm.TimeUS, 1.25*sm.TimeLowerBoundUS, "within 1.25x of the bound")
		assert.Less(t, rec.Body.Len(), 1<<20, "answer under 1 MB")
		assert.Equal(t, int64(70553706496), sm.TensorBytes/2, "Llama 3 70B's parameters")
	}
}
