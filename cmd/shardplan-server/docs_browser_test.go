package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The browser test drives Debian's chromium through chromedriver over the W3C WebDriver
// HTTP protocol (https://www.w3.org/TR/webdriver2/), with only the standard library.
const (
	chromiumPath     = "/usr/bin/chromium"
	chromedriverPath = "/usr/bin/chromedriver"
	// w3cElementKey is the JSON key of a web element reference.
	w3cElementKey = "element-6066-11e4-a52e-4f735466cecf"
)

// TestDocsPageInBrowser loads GET /docs in headless Chromium: the endpoint list renders,
// "Try it" on POST /v1/tiles and POST /v1/reshard (text/plain) works, and the page loads
// nothing from outside the server.
func TestDocsPageInBrowser(t *testing.T) {
	ctx, base, wd := openInBrowser(t, "/docs", 60*time.Second)

	// The endpoint list is built from /openapi2.json.
	list := wd.waitElement(ctx, t, `#endpoint-list[data-state="ready"]`)
	listText := wd.text(ctx, t, list)
	for _, want := range []string{"POST /v1/reshard", "POST /v1/tiles", "GET /v1/cost-models", "GET /healthz"} {
		assert.Contains(t, listText, want)
	}

	// Open POST /v1/tiles from the list, send its prefilled example and read the answer.
	wd.click(ctx, t, wd.waitElement(ctx, t, `#endpoint-list a[data-op-link="post /v1/tiles"]`))
	tiles := `details.op[data-op="post /v1/tiles"]`
	wd.waitScript(ctx, t, "tiles operation open", `return document.querySelector(arguments[0]).open`, tiles)
	wd.click(ctx, t, wd.waitElement(ctx, t, tiles+` button.try`))
	wd.waitScript(ctx, t, "tiles response", `return document.querySelector(arguments[0]).dataset.state === "done"`, tiles)
	assert.Equal(t, "200", wd.script(ctx, t, `return document.querySelector(arguments[0] + " .status").dataset.code`, tiles))
	assert.Contains(t, wd.text(ctx, t, wd.waitElement(ctx, t, tiles+` .status`)), "200")
	body := wd.text(ctx, t, wd.waitElement(ctx, t, tiles+` pre.body`))
	assert.Contains(t, body, `"tile_shape"`)
	assert.Contains(t, body, "\n  ", "the body is pretty-printed")
	assert.Equal(t, "application/json", wd.script(ctx, t,
		`return document.querySelector(arguments[0] + ' .headers [data-header="content-type"]').textContent`, tiles))

	// POST /v1/reshard with Accept: text/plain answers the diagram.
	reshard := `details.op[data-op="post /v1/reshard"]`
	wd.click(ctx, t, wd.waitElement(ctx, t, `#endpoint-list a[data-op-link="post /v1/reshard"]`))
	wd.waitScript(ctx, t, "reshard operation open", `return document.querySelector(arguments[0]).open`, reshard)
	wd.click(ctx, t, wd.waitElement(ctx, t, reshard+` select.accept option[value="text/plain"]`))
	wd.click(ctx, t, wd.waitElement(ctx, t, reshard+` button.try`))
	wd.waitScript(ctx, t, "reshard response", `return document.querySelector(arguments[0]).dataset.state === "done"`, reshard)
	assert.Equal(t, "200", wd.script(ctx, t, `return document.querySelector(arguments[0] + " .status").dataset.code`, reshard))
	assert.Contains(t, wd.script(ctx, t,
		`return document.querySelector(arguments[0] + ' .headers [data-header="content-type"]').textContent`, reshard), "text/plain")
	assert.Contains(t, wd.text(ctx, t, wd.waitElement(ctx, t, reshard+` pre.body`)), "mesh axis")
	assert.NotEmpty(t, wd.script(ctx, t,
		`return document.querySelector(arguments[0] + ' .headers [data-header="x-cache"]').textContent`, reshard))

	// POST /v1/graph with its prefilled example (API.md's graph, a reduction over model).
	graph := `details.op[data-op="post /v1/graph"]`
	wd.click(ctx, t, wd.waitElement(ctx, t, `#endpoint-list a[data-op-link="post /v1/graph"]`))
	wd.waitScript(ctx, t, "graph operation open", `return document.querySelector(arguments[0]).open`, graph)
	wd.click(ctx, t, wd.waitElement(ctx, t, graph+` button.try`))
	wd.waitScript(ctx, t, "graph response", `return document.querySelector(arguments[0]).dataset.state === "done"`, graph)
	assert.Equal(t, "200", wd.script(ctx, t, `return document.querySelector(arguments[0] + " .status").dataset.code`, graph))
	graphBody := wd.text(ctx, t, wd.waitElement(ctx, t, graph+` pre.body`))
	assert.Contains(t, graphBody, `"shardings"`)
	assert.Contains(t, graphBody, `"all_reduce"`)

	// The same operation with an application/mlir body: the module is posted as it is.
	wd.click(ctx, t, wd.waitElement(ctx, t, graph+` select.content-type option[value="application/mlir"]`))
	assert.Contains(t, wd.script(ctx, t, `return document.querySelector(arguments[0] + " textarea.body-input").value`, graph), "sdy.mesh")
	wd.click(ctx, t, wd.waitElement(ctx, t, graph+` button.try`))
	wd.waitScript(ctx, t, "graph module response", `return document.querySelector(arguments[0]).dataset.state === "done" && document.querySelector(arguments[0] + " .curl").textContent.includes("application/mlir")`, graph)
	assert.Equal(t, "200", wd.script(ctx, t, `return document.querySelector(arguments[0] + " .status").dataset.code`, graph))
	assert.Contains(t, wd.text(ctx, t, wd.waitElement(ctx, t, graph+` pre.body`)), `"arg0"`, "tensor ids are the module's SSA names")

	// Everything the page fetched came from the server (page, app.js, style.css,
	// openapi2.json at least).
	assertSelfContained(ctx, t, wd, base, 4)

	wd.script(ctx, t, `document.querySelector(arguments[0] + " .controls").scrollIntoView({block: "start"})`, tiles)
	wd.saveScreenshot(ctx, t, "docs.png")
}

// webDriver is a WebDriver session on a chromedriver this test started.
type webDriver struct {
	base    string // http://127.0.0.1:<port>
	session string
	client  *http.Client
}

// webDriverError is the error object of a failed WebDriver command.
type webDriverError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *webDriverError) Error() string {
	return fmt.Sprintf("webdriver %d %s: %s", e.Status, e.Code, e.Message)
}

// startWebDriver runs chromedriver on a free port and opens a headless Chromium session;
// cleanup deletes the session and stops chromedriver.
func startWebDriver(ctx context.Context, t *testing.T) *webDriver {
	t.Helper()
	port := freePort(t)
	var logs lockedBuffer
	cmd := exec.Command(chromedriverPath, "--port="+strconv.Itoa(port), "--log-level=WARNING")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("chromedriver output:\n%s", logs.String())
		}
	})

	wd := &webDriver{base: "http://127.0.0.1:" + strconv.Itoa(port), client: &http.Client{Timeout: 30 * time.Second}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var status struct {
			Ready bool `json:"ready"`
		}
		err := wd.call(ctx, http.MethodGet, wd.base+"/status", nil, &status)
		if err == nil && status.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromedriver not ready after 10s (last error: %v); output:\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	caps := map[string]any{
		"capabilities": map[string]any{
			"alwaysMatch": map[string]any{
				"browserName":      "chrome",
				"pageLoadStrategy": "normal",
				"goog:loggingPrefs": map[string]string{
					"browser": "ALL",
				},
				"goog:chromeOptions": map[string]any{
					"binary": chromiumPath,
					"args": []string{
						"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
						"--disable-background-networking", "--disable-component-update", "--disable-sync",
						"--disable-dev-shm-usage", "--window-size=1280,1000",
						"--user-data-dir=" + t.TempDir(),
					},
				},
			},
		},
	}
	var session struct {
		SessionID string `json:"sessionId"`
	}
	if err := wd.call(ctx, http.MethodPost, wd.base+"/session", caps, &session); err != nil {
		t.Fatalf("new session: %v; chromedriver output:\n%s", err, logs.String())
	}
	wd.session = session.SessionID
	t.Cleanup(func() {
		// t.Context is done in cleanup; give the delete its own short deadline.
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := wd.call(dctx, http.MethodDelete, wd.base+"/session/"+wd.session, nil, nil); err != nil {
			t.Logf("delete session: %v", err)
		}
	})
	return wd
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// call sends one WebDriver command and decodes the "value" of its answer into out.
func (wd *webDriver) call(ctx context.Context, method, url string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	resp, err := wd.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var envelope struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &envelope); err != nil {
		return fmt.Errorf("%s %s: %d, undecodable answer %q: %w", method, url, resp.StatusCode, raw, err)
	}
	if resp.StatusCode != http.StatusOK {
		werr := &webDriverError{Status: resp.StatusCode}
		_ = json.Unmarshal(envelope.Value, werr)
		return werr
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(envelope.Value, out)
}

// post sends a command on the session: path is relative to /session/{id}.
func (wd *webDriver) post(ctx context.Context, path string, in, out any) error {
	if in == nil {
		in = map[string]any{}
	}
	return wd.call(ctx, http.MethodPost, wd.base+"/session/"+wd.session+path, in, out)
}

func (wd *webDriver) get(ctx context.Context, path string, out any) error {
	return wd.call(ctx, http.MethodGet, wd.base+"/session/"+wd.session+path, nil, out)
}

// poll calls f every 50 ms until it reports done or the 10 s deadline passes.
func poll(ctx context.Context, t *testing.T, what string, f func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for {
		ok, err := f()
		if ok {
			return
		}
		last = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitElement waits for an element matching the CSS selector and returns its reference.
func (wd *webDriver) waitElement(ctx context.Context, t *testing.T, selector string) string {
	t.Helper()
	var id string
	poll(ctx, t, selector, func() (bool, error) {
		var ref map[string]string
		err := wd.post(ctx, "/element", map[string]string{"using": "css selector", "value": selector}, &ref)
		id = ref[w3cElementKey]
		return err == nil && id != "", err
	})
	return id
}

// waitScript waits until script (a function body, given args) returns true.
func (wd *webDriver) waitScript(ctx context.Context, t *testing.T, what, script string, args ...any) {
	t.Helper()
	poll(ctx, t, what, func() (bool, error) {
		var v any
		err := wd.post(ctx, "/execute/sync", map[string]any{"script": script, "args": nonNil(args)}, &v)
		return err == nil && v == true, err
	})
}

func (wd *webDriver) script(ctx context.Context, t *testing.T, script string, args ...any) any {
	t.Helper()
	var v any
	require.NoError(t, wd.post(ctx, "/execute/sync", map[string]any{"script": script, "args": nonNil(args)}, &v), script)
	return v
}

func nonNil(args []any) []any {
	if args == nil {
		return []any{}
	}
	return args
}

// click clicks an element, retrying while it is not yet interactable (still laying out).
func (wd *webDriver) click(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	poll(ctx, t, "click on "+id, func() (bool, error) {
		err := wd.post(ctx, "/element/"+id+"/click", nil, nil)
		var werr *webDriverError
		if errors.As(err, &werr) && werr.Code != "element not interactable" && werr.Code != "element click intercepted" {
			t.Fatalf("click: %v", err)
		}
		return err == nil, err
	})
}

func (wd *webDriver) text(ctx context.Context, t *testing.T, id string) string {
	t.Helper()
	var s string
	require.NoError(t, wd.get(ctx, "/element/"+id+"/text", &s))
	return s
}

func (wd *webDriver) screenshot(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	var b64 string
	require.NoError(t, wd.get(ctx, "/screenshot", &b64))
	png, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "screenshot is not a PNG")
	return png
}

// diagnose logs what the browser shows and its console, for a failed test.
func (wd *webDriver) diagnose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var src string
	if err := wd.get(ctx, "/source", &src); err == nil {
		t.Logf("page source:\n%s", src)
	}
	var entries []logEntry
	if err := wd.post(ctx, "/se/log", map[string]string{"type": "browser"}, &entries); err == nil {
		for _, e := range entries {
			t.Logf("console %s: %s", e.Level, e.Message)
		}
	}
}

type logEntry struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// browserLog reads the console log through chromedriver's log endpoint (not part of W3C
// WebDriver; nil when this chromedriver does not offer it).
func (wd *webDriver) browserLog(ctx context.Context, t *testing.T) []logEntry {
	t.Helper()
	var entries []logEntry
	if err := wd.post(ctx, "/se/log", map[string]string{"type": "browser"}, &entries); err != nil {
		t.Logf("browser log unavailable: %v", err)
		return nil
	}
	return entries
}
