package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docCall is one curl command of a Markdown page and the answer the page shows for it:
// a ```sh block holding the command, then a ```json or ```text block.
type docCall struct {
	page, line string
	path       string // "/v1/reshard?mesh=..."
	headers    map[string]string
	body       []byte
	kind       string // "json" or "text"
	shown      string
}

// docFigurePages are the pages whose shown answers are checked.
var docFigurePages = []string{"README.md", "docs/GUIDE.md"}

// TestDocFigures posts every curl command of the README and the user guide that is
// followed by an answer block to the real server, and checks that the answer holds
// what the page shows: every key and value of a JSON block (arrays element by
// element, a "..." element ends the comparison of its array; a number shown with k
// decimals matches the answer rounded to k decimals; "..." as a string matches any
// value), and every line of a text block, in order ("..." lines skip).
func TestDocFigures(t *testing.T) {
	var calls []docCall
	for _, page := range docFigurePages {
		calls = append(calls, docCalls(t, page)...)
	}
	calls = append(calls, apiDocCalls(t)...)
	require.NotEmpty(t, calls)
	base, _, _, _ := startServer(t, nil)
	for _, c := range calls {
		t.Run(c.page+":"+c.line, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+c.path, bytes.NewReader(c.body))
			require.NoError(t, err)
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var got bytes.Buffer
			_, err = got.ReadFrom(resp.Body)
			require.NoError(t, err)
			switch c.kind {
			case "json":
				var want, have any
				require.NoError(t, json.Unmarshal([]byte(c.shown), &want), "the shown answer is not JSON")
				require.NoError(t, json.Unmarshal(got.Bytes(), &have), "status %d: %s", resp.StatusCode, got.String())
				for _, diff := range jsonShown("", want, have) {
					t.Error(diff)
				}
			case "text":
				assertLinesInOrder(t, c.shown, got.String())
			}
		})
	}
}

// docCalls reads a page's curl commands that are followed by a shown answer.
func docCalls(t *testing.T, page string) []docCall {
	t.Helper()
	root := filepath.Join("..", "..")
	f, err := os.Open(filepath.Join(root, page))
	require.NoError(t, err)
	defer f.Close()
	var out []docCall
	var pending *docCall
	var block *strings.Builder
	kind, start := "", 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case block == nil && strings.HasPrefix(line, "```"):
			kind, start = strings.TrimPrefix(line, "```"), n
			block = &strings.Builder{}
		case block != nil && line == "```":
			text := block.String()
			block = nil
			switch kind {
			case "sh":
				pending = nil
				if c, ok := parseCurl(t, root, text); ok {
					c.page, c.line = page, strconv.Itoa(start)
					pending = &c
				}
			case "json", "text":
				if pending != nil {
					pending.kind, pending.shown = kind, text
					out = append(out, *pending)
				}
				pending = nil
			default:
				pending = nil
			}
		case block != nil:
			block.WriteString(line + "\n")
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// parseCurl reads the single curl command of a shell block (continuation lines
// joined): its URL path, headers and body (-d '...', -d @file, --data-binary @file).
func parseCurl(t *testing.T, root, text string) (docCall, bool) {
	t.Helper()
	joined := strings.ReplaceAll(text, "\\\n", " ")
	var cmd string
	for _, l := range strings.Split(joined, "\n") {
		switch trimmed := strings.TrimSpace(l); {
		case strings.HasPrefix(trimmed, "curl "):
			if cmd != "" {
				return docCall{}, false // several commands: no single answer to check
			}
			cmd = trimmed
		case cmd != "" && !strings.HasPrefix(trimmed, "#"):
			cmd += "\n" + l
		}
	}
	if cmd == "" {
		return docCall{}, false
	}
	words, err := shellWords(cmd)
	require.NoError(t, err, cmd)
	c := docCall{headers: map[string]string{}}
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-H" && i+1 < len(words):
			k, v, _ := strings.Cut(words[i+1], ":")
			c.headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
			i++
		case (w == "-d" || w == "--data-binary") && i+1 < len(words):
			arg := words[i+1]
			if name, ok := strings.CutPrefix(arg, "@"); ok {
				b, err := os.ReadFile(filepath.Join(root, name))
				require.NoError(t, err, "curl reads %s", name)
				c.body = b
			} else {
				c.body = []byte(arg)
			}
			i++
		case strings.HasPrefix(w, "localhost:8080/"):
			c.path = strings.TrimPrefix(w, "localhost:8080")
		}
	}
	return c, c.path != "" && c.body != nil
}

// shellWords splits a command line as sh does for the quoting the docs use: single
// and double quotes, backslash escapes outside single quotes.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			in = true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// jsonShown lists where have does not hold what want shows.
func jsonShown(path string, want, have any) []string {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: the page shows an object, the answer has %v", path, have)}
		}
		var diffs []string
		for k, wv := range w {
			if k == "..." {
				continue
			}
			hv, ok := h[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: shown, not in the answer", path, k))
				continue
			}
			diffs = append(diffs, jsonShown(path+"."+k, wv, hv)...)
		}
		return diffs
	case []any:
		h, ok := have.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: the page shows an array, the answer has %v", path, have)}
		}
		var diffs []string
		for i, wv := range w {
			if s, ok := wv.(string); ok && strings.HasPrefix(s, "...") {
				return diffs
			}
			if i >= len(h) {
				return append(diffs, fmt.Sprintf("%s: the page shows %d elements, the answer has %d", path, len(w), len(h)))
			}
			diffs = append(diffs, jsonShown(fmt.Sprintf("%s[%d]", path, i), wv, h[i])...)
		}
		if len(h) != len(w) {
			diffs = append(diffs, fmt.Sprintf("%s: the page shows %d elements, the answer has %d", path, len(w), len(h)))
		}
		return diffs
	case float64:
		h, ok := have.(float64)
		if !ok || !roundsTo(h, w) {
			return []string{fmt.Sprintf("%s: the page shows %v, the answer has %v", path, w, have)}
		}
		return nil
	case string:
		if strings.HasPrefix(w, "...") {
			return nil
		}
	}
	if fmt.Sprint(want) != fmt.Sprint(have) {
		return []string{fmt.Sprintf("%s: the page shows %v, the answer has %v", path, want, have)}
	}
	return nil
}

// roundsTo reports whether got, rounded to as many decimals as shown has, is shown.
func roundsTo(got, shown float64) bool {
	s := strconv.FormatFloat(shown, 'f', -1, 64)
	decimals := 0
	if _, frac, ok := strings.Cut(s, "."); ok {
		decimals = len(frac)
	}
	scale := math.Pow(10, float64(decimals))
	return math.Round(got*scale) == math.Round(shown*scale)
}

// assertLinesInOrder checks that every shown line (trailing spaces ignored) appears in
// got, in order; a line "..." skips any number of lines.
func assertLinesInOrder(t *testing.T, shown, got string) {
	t.Helper()
	lines := strings.Split(got, "\n")
	at := 0
	for _, want := range strings.Split(strings.TrimRight(shown, "\n"), "\n") {
		want = strings.TrimRight(want, " ")
		if strings.TrimSpace(want) == "..." {
			continue
		}
		found := false
		for ; at < len(lines); at++ {
			if strings.TrimRight(lines[at], " ") == want {
				found, at = true, at+1
				break
			}
		}
		if !assert.True(t, found, "shown line %q not in the answer (in order):\n%s", want, got) {
			return
		}
	}
}

var (
	// elidedObject and elidedArray are the API contract's placeholders, {...canonical...}
	// and [...devices as in /v1/tiles...]: values the page does not show.
	elidedObject = regexp.MustCompile(`\{\.\.\.[^{}"]*\}`)
	elidedArray  = regexp.MustCompile(`\[\.\.\.[^\[\]"]*\]`)
)

// apiDocCalls pairs each request example of docs/API.md with the response example that
// follows it under the same heading, the placeholders {...} and [...] read as "...".
func apiDocCalls(t *testing.T) []docCall {
	t.Helper()
	reqs := docRequests(t)
	f, err := os.ReadFile(filepath.Join("..", "..", "docs", "API.md"))
	require.NoError(t, err)
	lines := strings.Split(string(f), "\n")
	var out []docCall
	for i, r := range reqs {
		end := len(lines)
		if i+1 < len(reqs) {
			end = reqs[i+1].line
		}
		for n := r.line; n < end; n++ {
			if !strings.Contains(lines[n-1], "Response") || n >= len(lines) || lines[n] != "```json" {
				continue
			}
			var block []string
			for m := n + 1; m < len(lines) && lines[m] != "```"; m++ {
				block = append(block, lines[m])
			}
			shown := elidedObject.ReplaceAllString(strings.Join(block, "\n"), `"..."`)
			shown = elidedArray.ReplaceAllString(shown, `["..."]`)
			out = append(out, docCall{
				page: "docs/API.md", line: strconv.Itoa(n + 1), path: r.path,
				headers: map[string]string{"Content-Type": "application/json"},
				body:    []byte(r.body), kind: "json", shown: shown,
			})
			break
		}
	}
	return out
}
