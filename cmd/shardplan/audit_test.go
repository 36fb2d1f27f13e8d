package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func corpusHLO(name string) string {
	return filepath.Join("..", "..", "internal", "hlo", "testdata", "corpus", name)
}

func seedHLO(n string) string {
	return filepath.Join("..", "..", "internal", "hlo", "testdata", "seed003_case"+n+".hlo")
}

// auditCase is one CLI audit run: its arguments, exit status and what its output holds.
type auditCase struct {
	name   string
	args   []string
	code   int
	stdout []string
	stderr []string
	json   bool
}

// TestCLIAudit runs audit against a real server on a random loopback port and checks
// its exit status for every gate. The MLP module's memory peak is 49664 bytes per
// device and its communication 6.07 us (api's TestAuditStableHLOMLP).
func TestCLIAudit(t *testing.T) {
	server := realServer(t)
	mlp := example("graph-stablehlo-mlp.mlir")
	big := "C=1,D=2,Y=8,X=4,T=4"
	cases := []auditCase{
		{"module, no gate", []string{"audit", mlp}, exitOK, []string{"/tmp/mlp.py:12", "memory: peak 48.5 KiB per device at op 2"}, nil, false},
		{"within every gate", []string{"audit", mlp, "--memory-budget", "49664", "--max-time-us", "7", "--fail-on-remat"}, exitOK, []string{"within the budget"}, nil, false},
		{"over the memory budget", []string{"audit", mlp, "--memory-budget", "49663"}, exitViolation, []string{"OVER BUDGET"}, []string{"memory peak 49664 bytes per device at op 2 exceeds --memory-budget 49663"}, false},
		{"over the time threshold", []string{"audit", mlp, "--max-time-us", "6"}, exitViolation, nil, []string{"communication time 6.07 us exceeds --max-time-us 6"}, false},
		{"graph with an XLA remat", []string{"audit", example("graph-ci-gate.json"), "--fail-on-remat"}, exitViolation, []string{"XLA full rematerializations: 1", "P('D', ('X','Y','T'))"}, []string{"1 full rematerialization (--fail-on-remat)"}, false},
		{"graph with an XLA remat, no gate", []string{"audit", example("graph-ci-gate.json")}, exitOK, []string{"XLA full rematerializations: 1"}, nil, false},
		{"compiled with a remat", []string{"audit", seedHLO("4"), "--mesh", big, "--fail-on-remat"}, exitViolation, []string{"full rematerializations: 1", "all_gather %all-gather.1 over (D) [REMAT]", "shardplan: P('D', ('X','Y')) -> P(None, ('D','Y','X','T')) in 12.64 us", "fix: insert these sharding constraints, in order: P('D', ('X','Y','T'))"}, []string{"--fail-on-remat"}, false},
		{"compiled over the memory budget", []string{"audit", seedHLO("4"), "--mesh", big, "--memory-budget", "16777216"}, exitViolation, []string{"memory: peak 24.3 MiB per device at op all-gather.1"}, []string{"exceeds --memory-budget 16777216"}, false},
		{"compiled without remat", []string{"audit", seedHLO("1"), "--mesh", "X=2,Y=4", "--fail-on-remat"}, exitOK, []string{"collective_permute %collective-permute over (X,Y)"}, nil, false},
		{"json and a failed gate", []string{"audit", "--json", seedHLO("4"), "--fail-on-remat"}, exitViolation, []string{`"input":"compiled"`}, nil, true},
		{"bad mesh", []string{"audit", seedHLO("1"), "--mesh", "x=3"}, exitBadInput, nil, []string{"400 Invalid mesh", "the module runs on 8"}, false},
		{"not a module", []string{"audit", example("graph-stablehlo-mlp.json"), "--mesh", "nonsense"}, exitBadInput, nil, []string{"400"}, false},
		{"unmodeled collective", []string{"audit", corpusHLO("xla/parser_collective_broadcast.hlo")}, exitViolation, []string{"UNMODELED: 1 instruction communicating", "line 5: collective-broadcast %cb"}, []string{"1 instruction communicating without a price, first collective-broadcast %cb at line 5", "--allow-unmodeled accepts them"}, false},
		{"unmodeled allowed", []string{"audit", corpusHLO("xla/parser_collective_broadcast.hlo"), "--allow-unmodeled"}, exitOK, []string{"UNMODELED: 1 instruction communicating"}, nil, false},
		{"loop", []string{"audit", corpusHLO("xla/permute_decomposer_pipeline1.hlo"), "--max-time-us", "1000"}, exitOK, []string{"collective_permute %cp over (devices) x2 runs"}, nil, false},
		{"loop over the time threshold", []string{"audit", corpusHLO("xla/permute_decomposer_pipeline1.hlo"), "--max-time-us", "0.001"}, exitViolation, nil, []string{"exceeds --max-time-us 0.001"}, false},
		{"mesh in another order", []string{"audit", seedHLO("4"), "--mesh", "C=1,D=2,X=4,Y=8,T=4"}, exitBadInput, nil, []string{"400 Invalid mesh", "a mesh that fits: axis_0=2,axis_1=8,axis_2=4,axis_3=4"}, false},
		{"mesh inferred", []string{"audit", seedHLO("4")}, exitOK, []string{"mesh: inferred from the iota reshape [2,8,4,4]", "communication: 149.35 us"}, nil, false},
		{"exposed over the threshold", []string{"audit", corpusHLO("xla/lhs_all_gather_async_simple.hlo"), "--max-exposed-us", "0.001"}, exitViolation, []string{"the step waits on:", "%ag-start"}, []string{"exceeds --max-exposed-us 0.001"}, false},
		{"exposed within the threshold", []string{"audit", corpusHLO("xla/lhs_all_gather_async_simple.hlo"), "--max-exposed-us", "100000"}, exitOK, []string{"step: "}, nil, false},
		{"exposed threshold on a program", []string{"audit", mlp, "--max-exposed-us", "1"}, exitViolation, nil, []string{"--max-exposed-us gates a compiled module's schedule"}, false},
	}
	cases = append(cases, budgetCases(t)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, "", append([]string{"--server", server}, tc.args...)...)
			require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			for _, want := range tc.stdout {
				assert.Contains(t, r.stdout, want)
			}
			for _, want := range tc.stderr {
				assert.Contains(t, r.stderr, want)
			}
			if tc.json {
				assert.True(t, json.Valid([]byte(r.stdout)), r.stdout)
			}
		})
	}
}

// TestCLIAuditInProcess: without --server the audit runs in-process with the same answer.
func TestCLIAuditInProcess(t *testing.T) {
	r := runCLI(t, nil, "", "audit", example("graph-stablehlo-mlp.mlir"), "--max-time-us", "6")
	assert.Equal(t, exitViolation, r.code, r.stderr)
	assert.Contains(t, r.stdout, "/tmp/mlp.py:12")
}

// budgetCases are audits whose request file gives memory_budget_bytes_per_device: over
// it the audit exits 1 as --memory-budget makes it.
func budgetCases(t *testing.T) []auditCase {
	withBudget := func(name string, req map[string]any, budget int64) string {
		req["memory_budget_bytes_per_device"] = budget
		b, err := json.Marshal(req)
		require.NoError(t, err)
		p := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	var mlp map[string]any
	b, err := os.ReadFile(example("graph-stablehlo-mlp.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &mlp))
	seed, err := os.ReadFile(seedHLO("4"))
	require.NoError(t, err)
	compiled := func() map[string]any { return map[string]any{"hlo_module": string(seed)} }
	program := func() map[string]any {
		c := map[string]any{}
		maps.Copy(c, mlp)
		return c
	}
	return []auditCase{
		{"program over the request's budget", []string{"audit", withBudget("over.json", program(), 49663)}, exitViolation, []string{"OVER BUDGET"}, []string{"memory peak 49664 bytes per device at op 2 exceeds the request's memory_budget_bytes_per_device 49663"}, false},
		{"program within the request's budget", []string{"audit", withBudget("within.json", program(), 49664)}, exitOK, []string{"within the budget"}, nil, false},
		{"compiled over the request's budget", []string{"audit", withBudget("hlo.json", compiled(), 16777216)}, exitViolation, []string{"OVER BUDGET"}, []string{"exceeds the request's memory_budget_bytes_per_device 16777216"}, false},
		{"the flag's budget before the file's", []string{"audit", withBudget("both.json", program(), 1), "--memory-budget", "49664"}, exitOK, nil, nil, false},
	}
}
