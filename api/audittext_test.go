package api

import (
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestAuditTextGolden keeps the terminal reports of the audit examples (a program with
// XLA's remat and its fix; the compiled dump of the same reshard with shardplan's plan
// beside) as golden files: go test ./api -run TestAuditTextGolden -update.
func TestAuditTextGolden(t *testing.T) {
	srv := newTestServer(t, nil)
	cases := []struct {
		golden, path, ct, file string
	}{
		{"audit-ci-gate.txt", "/v1/audit", "application/json", "../examples/audit-ci-gate.json"},
		{"audit-seed003-case4.txt", "/v1/audit?mesh=C=1,D=2,Y=8,X=4,T=4", hloMediaType, "../examples/audit-seed003-case4.hlo"},
		{"audit-mlp.txt", "/v1/audit?memory_budget_bytes_per_device=65536", mlirMediaType, "../examples/graph-stablehlo-mlp.mlir"},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			rec := doAccept(t, srv, tc.path, tc.ct, "text/plain", readFile(t, tc.file))
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
			path := filepath.Join("testdata", tc.golden)
			if *update {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(path, rec.Body.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			assert.Equal(t, string(want), rec.Body.String())
		})
	}
}
