package api

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scheduledModule (internal/hlo's schedule test module): an all-gather-start whose
// done waits after a 1024^3 bf16 dot (4.68 us on tpu-v5p's 459 TFLOP/s), and a
// smaller one with nothing in between.
var scheduledModule = func() string {
	b, err := os.ReadFile("../internal/hlo/testdata/schedule_overlap.hlo")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func auditJSON(t *testing.T, fields map[string]any) *AuditResponse {
	t.Helper()
	srv := newTestServer(t, nil)
	b, err := json.Marshal(fields)
	require.NoError(t, err)
	rec := doAccept(t, srv, "/v1/audit", "application/json", "", string(b))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	a := readAudit(t, rec.Body.Bytes())
	return &a
}

// TestAuditSchedule: a compiled module's sites carry their exposed and overlapped
// times, the totals the step's time, and the ranking by exposed time.
func TestAuditSchedule(t *testing.T) {
	a := auditJSON(t, map[string]any{"hlo_module": scheduledModule, "cost_model": "tpu-v5p"})
	require.NotNil(t, a.Roofline)
	assert.Equal(t, 459.0, a.Roofline.PeakBF16TFLOPS)
	assert.NotEmpty(t, a.Roofline.Sources["hbm_gbps"])
	dot := 2.0 * 1024 * 1024 * 1024 / 459e6
	require.Len(t, a.Sites, 2)
	big := a.Sites[0]
	require.Equal(t, "big", big.Op)
	require.NotNil(t, big.ExposedUS)
	assert.InDelta(t, dot, *big.OverlappedUS, 1e-9)
	assert.InDelta(t, big.TimeUS-dot, *big.ExposedUS, 1e-9)
	assert.InDelta(t, a.Collectives[*big.Collective].ExposedUS, *big.ExposedUS, 1e-12)
	tt := a.Totals
	require.NotNil(t, tt.StepUS)
	assert.InDelta(t, *tt.ComputeUS+*tt.ExposedUS, *tt.StepUS, 1e-9)
	assert.InDelta(t, tt.TimeUS, *tt.ExposedUS+*tt.OverlappedUS, 1e-9)
	require.Len(t, tt.ByExposed, 2)
	assert.Equal(t, 1, tt.ByExposed[0].Rank)
	assert.GreaterOrEqual(t, tt.ByExposed[0].ExposedUS, tt.ByExposed[1].ExposedUS)
	assert.Zero(t, tt.Measured)
}

// TestAuditProfile: a measured profile beside the module replaces the prices of the
// instructions it names; sites report model and measurement; names the module lacks
// are listed.
func TestAuditProfile(t *testing.T) {
	profile := "costs { name: \"big\" cost_us: 100 }\ncosts { name: \"d\" cost_us: 30 }\ncosts { name: \"all-gather-start.9\" cost_us: 5 }\n"
	a := auditJSON(t, map[string]any{"hlo_module": scheduledModule, "cost_model": "tpu-v5p", "profile": profile})
	var big *AuditSite
	for i := range a.Sites {
		if a.Sites[i].Op == "big" {
			big = &a.Sites[i]
		}
	}
	require.NotNil(t, big)
	require.NotNil(t, big.MeasuredUS)
	assert.Equal(t, 100.0, *big.MeasuredUS)
	assert.NotEqual(t, 100.0, big.TimeUS, "time_us stays the model's price")
	assert.InDelta(t, 70, *big.ExposedUS, 1e-9, "the measured dot hides 30 of its measured 100 us")
	assert.Equal(t, 2, a.Totals.Measured)
	assert.Equal(t, []string{"all-gather-start.9"}, a.ProfileUnmatched)
	assert.Contains(t, AuditText(a), "(measured 100.00 us, model ")
}

// TestAuditProfileErrors: a profile that does not read, or one sent with a program, is
// a 400 naming the field.
func TestAuditProfileErrors(t *testing.T) {
	srv := newTestServer(t, nil)
	for _, tc := range []struct {
		name, body, field, detail string
	}{
		{"bad profile", `{"hlo_module": ` + jsonString(scheduledModule) + `, "profile": "costs { name: \"x\" cost_us: -2 }"}`, "profile", "line 1, column 28: cost_us must be a non-negative number"},
		{"profile not a string", `{"hlo_module": ` + jsonString(scheduledModule) + `, "profile": 5}`, "", "profile"},
		{"profile with a program", `{"module": "x", "profile": "costs { name: \"x\" cost_us: 2 }"}`, "profile", "send it with hlo_module"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := doAccept(t, srv, "/v1/audit", "application/json", "", tc.body)
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			assert.Contains(t, rec.Body.String(), tc.detail)
			if tc.field != "" {
				assert.Contains(t, rec.Body.String(), `"field":"`+tc.field+`"`)
				assert.Contains(t, rec.Body.String(), slugInvalidRequest)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
