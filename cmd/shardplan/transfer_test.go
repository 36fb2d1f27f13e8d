package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTransferCommand plans the Llama 3 8B sync example in-process: the report, the
// JSON, and both gates either side of the plan's figures.
func TestTransferCommand(t *testing.T) {
	file := example("transfer-llama3-8b-rl-sync.json")
	r := runCLI(t, nil, "", "transfer", file)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "291 tensors")
	assert.Contains(t, r.stdout, "candidates:")

	r = runCLI(t, nil, "", "--json", "transfer", file)
	require.Equal(t, exitOK, r.code, r.stderr)
	var resp struct {
		Summary struct {
			TimeUS         float64 `json:"time_us"`
			TimeEfficiency float64 `json:"time_efficiency"`
		} `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &resp))
	require.Greater(t, resp.Summary.TimeUS, 0.0)

	for _, c := range []struct {
		flag  string
		value float64
		code  int
	}{
		{"--max-time-us", resp.Summary.TimeUS * 1.01, exitOK},
		{"--max-time-us", resp.Summary.TimeUS * 0.99, exitViolation},
		{"--min-efficiency", resp.Summary.TimeEfficiency * 0.99, exitOK},
		{"--min-efficiency", min(1, resp.Summary.TimeEfficiency*1.001), exitViolation},
	} {
		r := runCLI(t, nil, "", c.flag, strconv.FormatFloat(c.value, 'f', -1, 64), "transfer", file)
		assert.Equal(t, c.code, r.code, "%s %v: %s", c.flag, c.value, r.stderr)
	}
	// Bad input is exit 2 with the field named.
	r = runCLI(t, nil, `{"cost_model": "tpu-v5p", "fabric_devices": 8, "source": {"mesh": "x=8", "first_device": 0},
		"targets": [{"mesh": "x=8", "first_device": 0}], "tensors": [{"name": "w", "shape": [8], "dtype": "f32", "source": ["x"], "target": [null]}]}`, "transfer", "-")
	assert.Equal(t, exitBadInput, r.code)
	assert.Contains(t, r.stderr, "cost_model")
}
