package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/shardplan/shardplan/api"
	"github.com/shardplan/shardplan/openapi"
)

// Exit statuses.
const (
	exitOK        = 0
	exitViolation = 1 // the server answered 422 policy-violation
	exitBadInput  = 2 // usage, unreadable input, or any other 4xx
	exitServer    = 3 // 5xx, or the server could not be reached
)

// maxInput bounds what is read from FILE or standard input.
const maxInput = 256 << 20

const usage = `usage: shardplan [flags] reshard|graph|tiles|audit|transfer FILE|-
       shardplan [flags] calibrate FILE...

Posts FILE (- for standard input) to POST /v1/<command> and prints the answer: the plan
summary, policy violations and suggested constraints, or the raw response with --json.
With no --server (and no SHARDPLAN_SERVER) it answers in-process with the service's
embedded defaults. A server that needs an API key gets SHARDPLAN_API_KEY as a Bearer
token. graph also takes a StableHLO module as text (sent as {"module": ...}).

audit takes a graph request (JSON), a StableHLO module (MLIR text) or a compiled HLO
module (HloModule text) and prints the audit report: the dearest collective sites with
their source lines, the memory peak, the remats and their fixes. Its gates make the exit
status 1: --fail-on-remat (a site XLA would fully rematerialize, or a remat in a compiled
module), --memory-budget (the memory peak over it; without the flag, over the request
file's memory_budget_bytes_per_device), --max-time-us (the communication time over
it), --max-exposed-us (the communication a compiled module's schedule exposes, over
it); and a compiled module with instructions that communicate without a price (listed
as UNMODELED) fails unless --allow-unmodeled.

transfer takes a transfer request (JSON) and prints its report: the plan's time against
the fabric's bound, the strategies priced, the phases and the tensor groups. Its gates
make the exit status 1: --max-time-us (the plan's time over it), --min-efficiency (its
time_efficiency, the bound over the time, under it).

calibrate takes nccl-tests outputs as printed (all_gather_perf, reduce_scatter_perf,
all_reduce_perf, alltoall_perf, sendrecv_perf; one run a file) and posts them to POST
/v1/cost-models/fit on top of --base: it writes the fitted cost model (JSON that any
request's cost_model accepts) to --out, or to standard output, and prints each
collective's error per scope, before and after, and the outliers (to standard error when
the model goes to standard output). --ranks and --nodes say what a run's output does not.

Exit status: 0 success, 1 policy violation (HTTP 422) or a failed audit or transfer gate, 2 bad
input or usage, 3 server or transport error.

flags:
`

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shardplan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", getenv("SHARDPLAN_SERVER"), "base URL of a shardplan server, e.g. http://localhost:8080 (env SHARDPLAN_SERVER; empty: in-process)")
	asJSON := fs.Bool("json", false, "print the raw JSON response (problem+json on errors) instead of the summary")
	timeout := fs.Duration("timeout", 60*time.Second, "give up on the request after this long")
	function := fs.String("function", "", "graph or audit with a StableHLO module: the function to read (default main)")
	var ao auditOptions
	fs.StringVar(&ao.mesh, "mesh", "", "audit of a module: the mesh as \"x=2,y=4\" (a compiled module's default: one axis of num_partitions devices)")
	fs.StringVar(&ao.costModel, "cost-model", "", "audit of a module: a cost model profile name (default tpu-v5p)")
	fs.StringVar(&ao.strategy, "strategy", "", "audit of a StableHLO module: xla (default) or optimal")
	fs.Int64Var(&ao.budget, "memory-budget", 0, "audit: per-device memory budget in bytes; exit 1 when the memory peak exceeds it (0: none)")
	fs.BoolVar(&ao.failOnRemat, "fail-on-remat", false, "audit: exit 1 when XLA would fully rematerialize some site (or a compiled module does)")
	fs.BoolVar(&ao.allowUnmodeled, "allow-unmodeled", false, "audit: do not fail when a compiled module has instructions that communicate without a price")
	fs.Float64Var(&ao.maxExposedUS, "max-exposed-us", 0, "audit of a compiled module: exit 1 when the communication its schedule exposes (the step waits on) exceeds this many microseconds (0: none)")
	fs.Float64Var(&ao.maxTimeUS, "max-time-us", 0, "audit, transfer: exit 1 when the total communication time exceeds this many microseconds (0: none)")
	minEff := fs.Float64("min-efficiency", 0, "transfer: exit 1 when the plan's time_efficiency (bound / time) is below this (0: none)")
	var co calibrateOptions
	fs.StringVar(&co.base, "base", "h100", "calibrate: the GPU profile the fit starts from (h100, h200, b200, gb200-nvl72, a100)")
	fs.StringVar(&co.name, "name", "", "calibrate: the fitted model's name (default: the base's name with -fitted)")
	fs.StringVar(&co.out, "out", "", "calibrate: write the fitted cost model to this file (default: standard output)")
	fs.IntVar(&co.ranks, "ranks", 0, "calibrate: the ranks of every run, where its output does not list its devices")
	fs.IntVar(&co.nodes, "nodes", 0, "calibrate: the nodes of every run, where its output does not list its hosts")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	// Flags may come before, between or after the positional arguments.
	var pos []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitBadInput
		}
		if rest = fs.Args(); len(rest) == 0 {
			break
		}
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	calibrating := len(pos) >= 2 && pos[0] == "calibrate"
	if !calibrating && (len(pos) != 2 || (pos[0] != "reshard" && pos[0] != "graph" && pos[0] != "tiles" && pos[0] != "audit" && pos[0] != "transfer")) {
		fmt.Fprintf(stderr, "shardplan: want a command (reshard, graph, tiles, audit or transfer) and a FILE or -, or calibrate and its FILEs, got %q\n\n", pos)
		fs.Usage()
		return exitBadInput
	}
	cmd, file := pos[0], pos[1]

	var body []byte
	var err error
	if calibrating {
		body, err = co.request(pos[1:], stdin)
	} else {
		body, err = readInput(file, stdin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "shardplan: %v\n", err)
		return exitBadInput
	}
	contentType, query, path := "application/json", "", "/v1/"+cmd
	switch cmd {
	case "calibrate":
		path = "/v1/cost-models/fit"
	case "graph":
		body = graphBody(body, *function)
	case "audit":
		ao.function = *function
		if body, contentType, query, err = ao.request(body); err != nil {
			fmt.Fprintf(stderr, "shardplan: %v\n", err)
			return exitBadInput
		}
	}

	client, base, err := newClient(*server)
	if err != nil {
		fmt.Fprintf(stderr, "shardplan: %v\n", err)
		return exitBadInput
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path+query, bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "shardplan: %v\n", err)
		return exitBadInput
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	if key := getenv("SHARDPLAN_API_KEY"); key != "" && *server != "" {
		// From the environment only: a flag would show the key in process lists.
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "shardplan: %v\n", err)
		return exitServer
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Fprintf(stderr, "shardplan: reading the response: %v\n", err)
		return exitServer
	}
	code := exitCode(resp.StatusCode, out)
	if cmd == "audit" && code == exitOK {
		return ao.report(stdout, stderr, out, *asJSON)
	}
	if cmd == "calibrate" && code == exitOK {
		return co.report(stdout, stderr, out, *asJSON)
	}
	if cmd == "transfer" && code == exitOK {
		return transferReport(stdout, stderr, out, *asJSON, ao.maxTimeUS, *minEff)
	}
	if *asJSON {
		stdout.Write(out)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			fmt.Fprintln(stdout)
		}
		return code
	}
	if err := printHuman(stdout, stderr, cmd, resp.StatusCode, code, out); err != nil {
		fmt.Fprintf(stderr, "shardplan: the server answered %d with a body that is not what %s returns: %v\n", resp.StatusCode, cmd, err)
		return exitServer
	}
	return code
}

// readInput reads FILE, or standard input for "-".
func readInput(file string, stdin io.Reader) ([]byte, error) {
	var r io.Reader = stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(b) > maxInput {
		return nil, fmt.Errorf("%s is larger than %d bytes", file, maxInput)
	}
	return b, nil
}

// graphBody wraps a StableHLO module (anything but a JSON object) as {"module": text}.
func graphBody(body []byte, function string) []byte {
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' {
		return body
	}
	req := map[string]string{"module": string(body)}
	if function != "" {
		req["function"] = function
	}
	b, _ := json.Marshal(req) // a map of strings always encodes
	return b
}

// newClient returns a client for the server at base, or one that calls the service
// in-process when base is empty.
func newClient(base string) (*http.Client, string, error) {
	if base == "" {
		srv, err := api.New(api.Deps{OpenAPI: openapi.JSON})
		if err != nil {
			return nil, "", err
		}
		return &http.Client{Transport: inProcess{srv}}, "http://in-process", nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, "", fmt.Errorf("--server %q is not an http(s) URL such as http://localhost:8080", base)
	}
	return &http.Client{}, strings.TrimSuffix(base, "/"), nil
}

// inProcess is an http.RoundTripper that serves requests with a handler in this process.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// exitCode maps an HTTP answer to the exit status.
func exitCode(status int, body []byte) int {
	switch {
	case status >= 200 && status < 300:
		return exitOK
	case status == http.StatusUnprocessableEntity && problemSlug(body) == "policy-violation":
		return exitViolation
	case status >= 400 && status < 500:
		return exitBadInput
	}
	return exitServer
}

func problemSlug(body []byte) string {
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &p)
	return strings.TrimPrefix(p.Type, api.ProblemTypeBase)
}
