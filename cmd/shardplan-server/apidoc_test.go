package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docRequest is a request example of docs/API.md: the JSON block after a line that
// starts with "Request", under a "## POST /v1/..." heading.
type docRequest struct {
	path string // "/v1/reshard"
	line int
	body string
}

// docRequests reads the request examples of the API contract.
func docRequests(t *testing.T) []docRequest {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "API.md"))
	require.NoError(t, err)
	defer f.Close()
	var out []docRequest
	var path, prev string
	var block *strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case block != nil && line == "```":
			out = append(out, docRequest{path: path, line: start, body: block.String()})
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case strings.HasPrefix(line, "## POST "):
			path = strings.TrimPrefix(line, "## POST ")
		case line == "```json" && strings.HasPrefix(prev, "Request") && path != "":
			block, start = &strings.Builder{}, n
		}
		prev = line
	}
	require.NoError(t, sc.Err())
	return out
}

// TestAPIDocExamples posts every request example of docs/API.md to the real server: the
// contract's examples must be requests the service answers.
func TestAPIDocExamples(t *testing.T) {
	reqs := docRequests(t)
	paths := map[string]bool{}
	for _, r := range reqs {
		paths[r.path] = true
	}
	require.Equal(t, map[string]bool{"/v1/tiles": true, "/v1/reshard": true, "/v1/graph": true, "/v1/audit": true, "/v1/transfer": true}, paths, "every POST endpoint has a request example")
	base, _, _, _ := startServer(t, nil)
	for _, r := range reqs {
		require.True(t, json.Valid([]byte(r.body)), "docs/API.md line %d: not JSON:\n%s", r.line, r.body)
		resp, out := send(t, http.MethodPost, base+r.path, "application/json", bytes.NewReader([]byte(r.body)))
		require.Equal(t, http.StatusOK, resp.StatusCode, "docs/API.md line %d (%s): %s", r.line, r.path, out)
	}
}
