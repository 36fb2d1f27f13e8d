package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ncclOutput(name string) string {
	return filepath.Join("..", "..", "internal", "cost", "testdata", "nccl", name)
}

// calibrate fits a model to nccl-tests files, in-process and against a real server: the
// model goes to --out (or standard output) as JSON a request's cost_model takes, and the
// report gives the error per collective and scope; a file it cannot read exits 2.
func TestCLICalibrate(t *testing.T) {
	files := []string{ncclOutput("xxrjun-h100-1x8-allreduce.txt"), ncclOutput("xxrjun-h100-1x8-allgather.txt")}
	for _, server := range []string{"", realServer(t)} {
		env := map[string]string{"SHARDPLAN_SERVER": server}
		out := filepath.Join(t.TempDir(), "model.json")
		r := runCLI(t, env, "", append([]string{"calibrate", "--base", "h100", "--name", "lab", "--out", out}, files...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "collective")
		assert.Contains(t, r.stdout, "all_reduce")
		assert.Contains(t, r.stdout, "all_gather")
		assert.Contains(t, r.stdout, "node")
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		var model map[string]any
		require.NoError(t, json.Unmarshal(b, &model))
		assert.Equal(t, "lab", model["name"])

		// The model on standard output, the report on standard error.
		r = runCLI(t, env, "", append([]string{"calibrate"}, files...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &model))
		assert.Equal(t, "h100-fitted", model["name"])
		assert.Contains(t, r.stderr, "geomean error")

		// A reshard takes the fitted model as its cost_model.
		req := `{"mesh": "x=8", "shape": [4096, 4096], "dtype": "bf16", "source": ["x", null], "target": [null, null], "cost_model": ` + string(b) + `}`
		rr := runCLI(t, env, req, "reshard", "-")
		require.Equal(t, exitOK, rr.code, rr.stderr)
		assert.Contains(t, rr.stdout, "all_gather")

		bad := filepath.Join(t.TempDir(), "bad.txt")
		require.NoError(t, os.WriteFile(bad, []byte("#  size count type redop root time algbw busbw #wrong\n  1024 256 float sum -1 abc 0.1 0.1 0\n"), 0o644))
		r = runCLI(t, env, "", "calibrate", bad)
		assert.Equal(t, exitBadInput, r.code)
		assert.Contains(t, r.stdout+r.stderr, "outputs[0].text")
	}
}
