package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hostile-input corpus (testdata/hostile, README there): requests an attacker or a
// careless client sends, each with the status it must get. TestHostileCorpus sends every
// one to a real server on a random loopback port, in one process, one after another:
// besides its status, each must leave the server answering (a request that holds its
// compute slot past its deadline would starve the next ones; SHARDPLAN_MAX_COMPUTE is
// 1 here, so one hog stops the corpus).

// hostileCase is one corpus file: the request line, headers, the wanted status and
// problem type, and the body (a template, expanded by hostileFuncs).
type hostileCase struct {
	name, method, path string
	header             http.Header
	status             int
	problem            string // the problem type's slug ("" for a 2xx or any)
	body               string
}

// hostileFuncs expand a body template: repeat N S is S N times; seq N FORMAT SEP joins
// FORMAT formatted with 0..N-1 by SEP.
var hostileFuncs = template.FuncMap{
	"repeat": func(n int, s string) string { return strings.Repeat(s, n) },
	"seq": func(n int, format, sep string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(sep)
			}
			fmt.Fprintf(&b, format, i)
		}
		return b.String()
	},
}

// readHostile parses a corpus file:
//
//	# comment lines
//	POST /v1/reshard
//	Content-Type: application/json
//	Status: 400
//	Problem: limit-exceeded
//
//	body template (⟦ ⟧ delimit actions)
func readHostile(t *testing.T, file string) hostileCase {
	t.Helper()
	f := readCorpusFile(t, file)
	c := hostileCase{name: f.name, method: f.method, path: f.path, header: f.header, problem: f.fields["Problem"], body: f.body}
	var err error
	c.status, err = strconv.Atoi(f.fields["Status"])
	require.NoError(t, err, "%s: give Status", file)
	return c
}

// corpusFile is a request file of testdata/hostile or testdata/hogs: the request line,
// headers, the corpus' own fields (Status, Problem) and the expanded body.
type corpusFile struct {
	name, method, path string
	header             http.Header
	fields             map[string]string
	body               string
}

// readCorpusFile parses a request file: "METHOD PATH", header lines (Status and Problem
// are the corpus' fields, the rest HTTP headers), a blank line, then the body template
// (⟦ ⟧ delimit actions, expanded by hostileFuncs). Lines starting with # are comments.
func readCorpusFile(t *testing.T, file string) corpusFile {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	head, body, ok := strings.Cut(string(raw), "\n\n")
	require.True(t, ok, "%s: headers, a blank line, then the body", file)
	c := corpusFile{name: filepath.Base(file), header: http.Header{}, fields: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(head))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#") || line == "":
		case c.method == "":
			c.method, c.path, ok = strings.Cut(line, " ")
			require.True(t, ok, "%s: the first line is METHOD PATH", file)
		default:
			k, v, ok := strings.Cut(line, ":")
			require.True(t, ok, "%s: header line %q", file, line)
			v = strings.TrimSpace(v)
			switch k {
			case "Status", "Problem":
				c.fields[k] = v
			default:
				c.header.Add(k, v)
			}
		}
	}
	tmpl, err := template.New(c.name).Delims("⟦", "⟧").Funcs(hostileFuncs).Parse(strings.TrimSuffix(body, "\n"))
	require.NoError(t, err, file)
	var b bytes.Buffer
	require.NoError(t, tmpl.Execute(&b, nil), file)
	c.body = b.String()
	return c
}

func TestHostileCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "hostile", "*.http"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	base, _, _, _ := startServer(t, map[string]string{
		"SHARDPLAN_MAX_COMPUTE":     "1",
		"SHARDPLAN_REQUEST_TIMEOUT": "2m", // generous: the corpus checks statuses, not speed
	})
	for _, file := range files {
		c := readHostile(t, file)
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), c.method, base+c.path, strings.NewReader(c.body))
			require.NoError(t, err)
			req.Header = c.header.Clone()
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, err = buf.ReadFrom(resp.Body)
			require.NoError(t, err)
			require.Equal(t, c.status, resp.StatusCode, "%.600s", buf.String())
			if resp.StatusCode >= 400 {
				assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
				assert.Less(t, buf.Len(), 256<<10, "an error answer is bounded")
				var p problem
				require.NoError(t, json.Unmarshal(buf.Bytes(), &p))
				if c.problem != "" {
					assert.Equal(t, "https://shardplan.dev/problems/"+c.problem, p.Type, p.Detail)
				}
			}
			// The server still answers at once: nothing hogs the one compute slot.
			hr, hb := send(t, http.MethodGet, base+"/healthz", "", nil)
			require.Equal(t, http.StatusOK, hr.StatusCode, string(hb))
		})
	}
}
