package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hog corpus (testdata/hogs, README there): legal requests whose planning would
// run for minutes, each with the statuses it may get under a short request deadline.
// TestHogsLeaveNoWorkBehind posts them, one after another, to a real server whose
// requests time out after a second, and after each waits for the server's computing
// gauge to come back to zero, then asks for a small plan: a request past its deadline
// neither holds its compute slot nor keeps a core busy.

// hogCase is one corpus file: the request line, headers, the statuses it may get and
// the body (a template, expanded by hostileFuncs).
type hogCase struct {
	name, method, path string
	header             http.Header
	statuses           []int
	body               string
}

// readHog parses a corpus file: the hostile corpus' format, with Status a list of
// statuses separated by spaces.
func readHog(t *testing.T, file string) hogCase {
	t.Helper()
	f := readCorpusFile(t, file)
	c := hogCase{name: f.name, method: f.method, path: f.path, header: f.header, body: f.body}
	for _, v := range strings.Fields(f.fields["Status"]) {
		st, err := strconv.Atoi(v)
		require.NoError(t, err, file)
		c.statuses = append(c.statuses, st)
	}
	require.NotEmpty(t, c.statuses, "%s: give Status", file)
	return c
}

// computingRE reads the computing gauge off /metrics.
var computingRE = regexp.MustCompile(`(?m)^shardplan_computing_requests (\S+)$`)

// hogBudget is how long a hog's work may go on after its answer before the test calls
// its slot held: generous, as no clock is raced (a stopped request lets go in
// milliseconds; one that does not stop holds its slot for minutes).
const hogBudget = 30 * time.Second

func TestHogsLeaveNoWorkBehind(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "hogs", "*.http"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	base, _, _, _ := startServer(t, map[string]string{
		"SHARDPLAN_REQUEST_TIMEOUT": "1s",
		"SHARDPLAN_MAX_COMPUTE":     "2",
	})
	computing := func() float64 {
		_, body := send(t, http.MethodGet, base+"/metrics", "", nil)
		m := computingRE.FindSubmatch(body)
		require.NotNil(t, m, "/metrics has shardplan_computing_requests")
		v, err := strconv.ParseFloat(string(m[1]), 64)
		require.NoError(t, err)
		return v
	}
	for i, file := range files {
		c := readHog(t, file)
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), c.method, base+c.path, strings.NewReader(c.body))
			require.NoError(t, err)
			req.Header = c.header.Clone()
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var buf bytes.Buffer
			_, err = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.True(t, slices.Contains(c.statuses, resp.StatusCode), "status %d, want one of %v: %.300s", resp.StatusCode, c.statuses, buf.String())

			until := time.Now().Add(hogBudget)
			for computing() != 0 {
				require.True(t, time.Now().Before(until), "the hog still holds a compute slot %v after its answer", hogBudget)
				time.Sleep(20 * time.Millisecond)
			}
			// A small request of its own (nothing cached) is planned at once.
			small := `{"mesh":"x=2,y=4","shape":[64,` + strconv.Itoa(128+i) + `],"dtype":"f32","source":[["x"],["y"]],"target":[["y"],["x"]]}`
			sr, sb := send(t, http.MethodPost, base+"/v1/reshard", "application/json", strings.NewReader(small))
			assert.Equal(t, http.StatusOK, sr.StatusCode, "%.300s", sb)
		})
	}
}
