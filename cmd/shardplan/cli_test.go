package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/api"
)

func example(name string) string { return filepath.Join("..", "..", "examples", name) }

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// realServer serves the API on a random loopback port.
func realServer(t *testing.T) string {
	t.Helper()
	srv, err := api.New(api.Deps{})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestCLI runs every case in-process and against a real server.
func TestCLI(t *testing.T) {
	badSharding := `{"mesh": "x=2", "shape": [4], "dtype": "f32", "sharding": ["q"]}`
	cases := []struct {
		name    string
		stdin   string
		args    []string
		code    int
		stdout  []string
		stderr  []string
		jsonOut bool
	}{
		{name: "reshard", args: []string{"reshard", example("reshard-seed003-case1-xla-pairs.json")}, code: exitOK,
			stdout: []string{"from P('X', None)", "to   P('Y', 'X')", "collective_permute", "2.0 MiB per device (lower bound 2.0 MiB, efficiency 100%)", "(time bound 12.65 us, ", "full rematerialization: no"}},
		{name: "reshard from stdin, flags after", stdin: `{"mesh": "x=2", "shape": [4], "dtype": "bfloat16", "source": "P('x')", "target": "{replicated}"}`,
			args: []string{"reshard", "-"}, code: exitOK, stdout: []string{"all_gather", "to   P(None)"}},
		{name: "policy violation", args: []string{"reshard", example("ci-gate-xla-case4.json")}, code: exitViolation,
			stdout: []string{"POLICY VIOLATION (1):", "forbid_full_rematerialization", "fix: insert these sharding constraints", "P('D', ('X','Y','T'))", "full rematerialization: YES"}},
		{name: "graph violation", args: []string{"graph", example("graph-ci-gate.json")}, code: exitViolation,
			stdout: []string{"POLICY VIOLATION (1):", "(op constrain, tensor a)", "P('D', ('X','Y','T'))"}},
		{name: "graph", args: []string{"graph", example("graph-mlp.json")}, code: exitOK,
			stdout: []string{"all_reduce of tensor y at op down", "w1  P(None, 'model')"}},
		{name: "graph from a StableHLO module", args: []string{"graph", example("graph-stablehlo-mlp.mlir")}, code: exitOK,
			stdout: []string{"arg1        P(None, 'model')", "result0     P('data', None)", "all_reduce of tensor 4 at op 4"}},
		{name: "tiles", args: []string{"tiles", example("tiles-16x23.json")}, code: exitOK,
			stdout: []string{"tile shape [6 6]", "t[13 17] is on device 10 (coords [2 2]) at local index [1 5]"}},
		{name: "bad sharding", stdin: badSharding, args: []string{"tiles", "-"}, code: exitBadInput,
			stderr: []string{"400 Invalid sharding", `sharding[0]: unknown mesh axis "q"`}},
		{name: "json", args: []string{"--json", "tiles", example("tiles-16x23.json")}, code: exitOK, jsonOut: true, stdout: []string{`"tile_shape":[6,6]`}},
		{name: "json violation", args: []string{"reshard", example("ci-gate-xla-case4.json"), "--json"}, code: exitViolation, jsonOut: true,
			stdout: []string{`"type":"https://shardplan.dev/problems/policy-violation"`}},
		{name: "json bad input", stdin: badSharding, args: []string{"tiles", "-", "-json"}, code: exitBadInput, jsonOut: true, stdout: []string{`/invalid-sharding"`}},
	}
	modes := map[string]func() []string{
		"in-process":  func() []string { return nil },
		"real server": func() []string { return []string{"--server", realServer(t)} },
	}
	for mode, flags := range modes {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				r := runCLI(t, nil, tc.stdin, append(flags(), tc.args...)...)
				require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				for _, want := range tc.stdout {
					assert.Contains(t, r.stdout, want)
				}
				for _, want := range tc.stderr {
					assert.Contains(t, r.stderr, want)
				}
				if tc.jsonOut {
					assert.True(t, json.Valid([]byte(r.stdout)), "stdout is one JSON value: %s", r.stdout)
				}
			})
		}
	}
}

func TestCLIUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no args", nil, exitBadInput, "want a command"},
		{"unknown command", []string{"plan", "x.json"}, exitBadInput, "want a command"},
		{"no file", []string{"reshard"}, exitBadInput, "want a command"},
		{"missing file", []string{"reshard", "no-such-file.json"}, exitBadInput, "no-such-file.json"},
		{"unknown flag", []string{"--bogus", "reshard", "-"}, exitBadInput, "bogus"},
		{"bad server", []string{"--server", "localhost:8080", "reshard", "-"}, exitBadInput, "not an http(s) URL"},
		{"help", []string{"-h"}, exitOK, "Exit status"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, "{}", tc.args...)
			assert.Equal(t, tc.code, r.code)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}

// TestCLIServerErrors: an unreachable server and a 5xx exit 3.
func TestCLIServerErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	r := runCLI(t, nil, "{}", "--server", closed, "tiles", "-")
	assert.Equal(t, exitServer, r.code)
	assert.Contains(t, r.stderr, "connection refused")

	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"https://shardplan.dev/problems/overloaded","title":"Overloaded","status":503,"detail":"too many requests in flight"}`)
	}))
	defer broken.Close()
	// SHARDPLAN_SERVER stands in for --server.
	r = runCLI(t, map[string]string{"SHARDPLAN_SERVER": broken.URL}, "{}", "tiles", "-")
	assert.Equal(t, exitServer, r.code)
	assert.Contains(t, r.stderr, "503 Overloaded: too many requests in flight")
}

// TestCLIGraphModule: graph sends a module's text as {"module": ..., "function": ...}.
func TestCLIGraphModule(t *testing.T) {
	var got map[string]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/v1/graph", r.URL.Path)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"mesh":{"name":"mesh","axes":[{"name":"x","size":2}]},"shardings":{},"collectives":[],"summary":{"strategy":"optimal","cost_model":"tpu-v5p"}}`)
	}))
	defer srv.Close()
	module := "sdy.mesh @mesh = <[\"x\"=2]>\nfunc.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  return %arg0 : tensor<8xf32>\n}\n"
	r := runCLI(t, nil, module, "--server", srv.URL, "--function", "f", "graph", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, map[string]string{"module": module, "function": "f"}, got)
	assert.Contains(t, r.stdout, "communication: none (no reshard, no reduction)")
}

// TestCLIAPIKey: against a server with API keys, SHARDPLAN_API_KEY is sent as a Bearer
// token; without it the 401 is bad input (exit 2).
func TestCLIAPIKey(t *testing.T) {
	const key = "sk-cli-test-0123456789abcdef"
	srv, err := api.New(api.Deps{Limits: api.DefaultLimits(), Access: api.Access{APIKeys: []string{key}}})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	file := example("reshard-seed003-case1.json")
	r := runCLI(t, map[string]string{"SHARDPLAN_SERVER": ts.URL}, "", "reshard", file)
	assert.Equal(t, exitBadInput, r.code, r.stderr)
	assert.Contains(t, r.stdout+r.stderr, "401")
	r = runCLI(t, map[string]string{"SHARDPLAN_SERVER": ts.URL, "SHARDPLAN_API_KEY": key}, "", "reshard", file)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout+r.stderr, key, "the key is never printed")
}
