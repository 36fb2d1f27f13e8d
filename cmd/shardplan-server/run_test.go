package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is an io.Writer safe for the server goroutines and the test to share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listenRE = regexp.MustCompile(`listening on (\S+)`)

// testBudget is how long a test waits for the service: its request deadline unless the
// test sets SHARDPLAN_REQUEST_TIMEOUT, and the wait for it to listen. It is generous on
// purpose: a request that answers in a second on a quiet machine may take ten on a loaded
// one, and a test must not turn that into a 503 timeout (the deadline itself is tested
// with deadlines the test sets).
const testBudget = 2 * time.Minute

// startServer runs the real service through run on 127.0.0.1:0 and returns its base URL,
// a cancel func and the channel run's result arrives on. The service's environment is env,
// with SHARDPLAN_REQUEST_TIMEOUT testBudget unless env sets it.
func startServer(t *testing.T, env map[string]string, args ...string) (string, context.CancelFunc, <-chan error, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	getenv := func(k string) string {
		if v, ok := env[k]; ok || k != "SHARDPLAN_REQUEST_TIMEOUT" {
			return v
		}
		return testBudget.String()
	}
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), getenv, stdout, stderr) }()
	deadline := time.Now().Add(testBudget)
	for {
		if m := listenRE.FindStringSubmatch(stdout.String()); m != nil {
			t.Cleanup(cancel)
			return "http://" + m[1], cancel, done, stderr
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("run returned before listening: %v\nstderr: %s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("server did not print its address; stderr: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
	Errors   []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

func send(t *testing.T, method, url, contentType string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func TestEndToEnd(t *testing.T) {
	base, cancel, done, stderr := startServer(t, map[string]string{"SHARDPLAN_MAX_BODY_BYTES": "65536", "SHARDPLAN_LOG_FORMAT": "json"})

	t.Run("healthz", func(t *testing.T) {
		resp, body := send(t, http.MethodGet, base+"/healthz", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.JSONEq(t, `{"status":"ok"}`, string(body))
		assert.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	})
	t.Run("readyz", func(t *testing.T) {
		resp, body := send(t, http.MethodGet, base+"/readyz", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var r struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
		}
		require.NoError(t, json.Unmarshal(body, &r))
		assert.Equal(t, "ready", r.Status)
		assert.Equal(t, "ok", r.Checks["draining"])
	})
	t.Run("openapi", func(t *testing.T) {
		resp, body := send(t, http.MethodGet, base+"/openapi2.json", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var spec struct {
			Swagger string                    `json:"swagger"`
			Paths   map[string]map[string]any `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(body, &spec))
		assert.Equal(t, "2.0", spec.Swagger)
		assert.Contains(t, spec.Paths["/v1/tiles"], "post")

		resp, body = send(t, http.MethodGet, base+"/openapi.json", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, again := send(t, http.MethodGet, base+"/openapi3.json", "", nil)
		assert.Equal(t, string(body), string(again), "/openapi3.json is /openapi.json")
		var v3 struct {
			OpenAPI    string                    `json:"openapi"`
			Paths      map[string]map[string]any `json:"paths"`
			Components struct {
				Schemas map[string]struct {
					Properties map[string]struct {
						OneOf []any `json:"oneOf"`
					} `json:"properties"`
				} `json:"schemas"`
			} `json:"components"`
		}
		require.NoError(t, json.Unmarshal(body, &v3))
		assert.True(t, strings.HasPrefix(v3.OpenAPI, "3."), v3.OpenAPI)
		assert.Contains(t, v3.Paths["/v1/reshard"], "post")
		assert.Len(t, v3.Components.Schemas["ReshardRequest"].Properties["source"].OneOf, 3, "string, array or object")
	})

	t.Run("tiles seed", func(t *testing.T) {
		resp, body := send(t, http.MethodPost, base+"/v1/tiles", "application/json", strings.NewReader(
			`{"mesh": "x=3,y=4", "shape": [16, 23], "dtype": "f32", "sharding": [[0], [1]], "locate": [[13, 17]]}`))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var r struct {
			TileShape []int64 `json:"tile_shape"`
			TileBytes int64   `json:"tile_bytes"`
			Maps      struct {
				DeviceToGlobal string `json:"device_to_global"`
				GlobalToDevice string `json:"global_to_device"`
			} `json:"maps"`
			Devices []struct {
				Device int        `json:"device"`
				Coords []int      `json:"coords"`
				Ranges [][2]int64 `json:"ranges"`
			} `json:"devices"`
			Locate []struct {
				Index  []int64 `json:"index"`
				Owners []struct {
					Device     int     `json:"device"`
					Coords     []int   `json:"coords"`
					LocalIndex []int64 `json:"local_index"`
				} `json:"owners"`
			} `json:"locate"`
		}
		require.NoError(t, json.Unmarshal(body, &r))
		assert.Equal(t, []int64{6, 6}, r.TileShape)
		assert.Equal(t, int64(6*6*4), r.TileBytes)
		assert.Equal(t, "t[i, j] -> d(i floordiv 6, j floordiv 6)[i mod 6, j mod 6]", r.Maps.GlobalToDevice)
		require.Len(t, r.Devices, 12)
		require.Len(t, r.Locate, 1)
		assert.Equal(t, []int64{13, 17}, r.Locate[0].Index)
		require.Len(t, r.Locate[0].Owners, 1)
		o := r.Locate[0].Owners[0]
		assert.Equal(t, 10, o.Device)
		assert.Equal(t, []int{2, 2}, o.Coords)
		assert.Equal(t, []int64{1, 5}, o.LocalIndex)
		assert.Equal(t, [][2]int64{{12, 16}, {12, 18}}, r.Devices[10].Ranges)
	})

	bad := []struct {
		name   string
		method string
		path   string
		ctype  string
		body   string
		status int
		slug   string
		field  string
	}{
		{"malformed JSON", "POST", "/v1/tiles", "application/json", `{"mesh": "x=2", "shape": [4`, 400, "invalid-json", ""},
		{"wrong type", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2","shape":[4,"8"],"dtype":"f32","sharding":[[0],null]}`, 400, "invalid-json", "shape[1]"},
		{"wrong type in mesh", "POST", "/v1/tiles", "application/json", `{"mesh":{"axes":[{"name":"x","size":true}]},"shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, "invalid-mesh", "mesh.axes[0].size"},
		{"unknown axis, array form", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":["q",null]}`, 400, "invalid-sharding", "sharding[0]"},
		{"unknown axis, object form", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":{"dims":[{"axes":["q"]},{"axes":[]}]}}`, 400, "invalid-sharding", "sharding.dims[0].axes[0]"},
		{"duplicate axes", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2,y=2","shape":[4,4],"dtype":"f32","sharding":{"dims":[{"axes":["x"]},{"axes":["y","x"]}]}}`, 400, "invalid-sharding", "sharding.dims[1].axes[1]"},
		{"overlapping sub-axes", "POST", "/v1/tiles", "application/json", `{"mesh":"x=4","shape":[4,4],"dtype":"f32","sharding":[["x:(1)2"],["x:(1)4"]]}`, 400, "invalid-sharding", "sharding[1][0]"},
		{"invalid sub-axis", "POST", "/v1/tiles", "application/json", `{"mesh":"x=4","shape":[4,4],"dtype":"f32","sharding":[["x:(1)3"],null]}`, 400, "invalid-sharding", "sharding[0][0]"},
		{"rank mismatch", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2,y=2","shape":[4],"dtype":"f32","sharding":[["x"],["y"]]}`, 400, "invalid-sharding", "sharding"},
		{"zero mesh size", "POST", "/v1/tiles", "application/json", `{"mesh":{"axes":[{"name":"x","size":0}]},"shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, "invalid-mesh", "mesh.axes[0].size"},
		{"negative mesh size", "POST", "/v1/tiles", "application/json", `{"mesh":"x=-2","shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, "invalid-mesh", "mesh"},
		{"zero dim", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2","shape":[0],"dtype":"f32","sharding":[[0]]}`, 400, "invalid-request", "shape[0]"},
		{"negative dim", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2","shape":[4,-1],"dtype":"f32","sharding":[[0],null]}`, 400, "invalid-request", "shape[1]"},
		{"10^9 devices", "POST", "/v1/tiles", "application/json", `{"mesh":"x=1000,y=1000,z=1000","shape":[4],"dtype":"f32","sharding":[[0]]}`, 400, "limit-exceeded", "mesh"},
		{"unknown dtype", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2","shape":[4],"dtype":"f31","sharding":[[0]]}`, 400, "invalid-request", "dtype"},
		{"locate out of range", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[0]],"locate":[[4]]}`, 400, "invalid-request", "locate[0][0]"},
		{"oversized body", "POST", "/v1/tiles", "application/json", `{"mesh":"x=2","shape":[4],"dtype":"f32","sharding":[[0]],"devices":[` + strings.Repeat("0,", 40000) + `0]}`, 413, "body-too-large", ""},
		{"wrong content type", "POST", "/v1/tiles", "text/plain", `{}`, 415, "unsupported-media-type", ""},
		{"unknown route", "GET", "/v1/nope", "", ``, 404, "not-found", ""},
		{"wrong method", "GET", "/v1/tiles", "", ``, 405, "method-not-allowed", ""},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			resp, b := send(t, tc.method, base+tc.path, tc.ctype, body)
			require.Equal(t, tc.status, resp.StatusCode, string(b))
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			var p problem
			require.NoError(t, json.Unmarshal(b, &p), string(b))
			assert.Equal(t, "https://shardplan.dev/problems/"+tc.slug, p.Type)
			assert.Equal(t, tc.status, p.Status)
			assert.Equal(t, resp.Header.Get("X-Request-Id"), p.Instance)
			if tc.status == http.StatusMethodNotAllowed {
				assert.Equal(t, "POST", resp.Header.Get("Allow"))
			}
			if tc.field != "" {
				var got []string
				for _, e := range p.Errors {
					got = append(got, e.Field)
				}
				assert.Contains(t, got, tc.field, p.Detail)
			}
		})
	}

	t.Run("metrics", func(t *testing.T) {
		resp, body := send(t, http.MethodGet, base+"/metrics", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		s := string(body)
		assert.Contains(t, s, `shardplan_http_requests_total{method="POST",route="/v1/tiles",status="200"} 1`)
		assert.Contains(t, s, `shardplan_http_requests_total{method="POST",route="/v1/tiles",status="400"}`)
		assert.Contains(t, s, `shardplan_http_request_duration_seconds_bucket{method="POST",route="/v1/tiles"`)
		assert.Contains(t, s, "go_goroutines")
	})

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "graceful shutdown returns nil")
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	logs := stderr.String()
	assert.Contains(t, logs, `"msg":"shutting down"`)
	assert.Contains(t, logs, `"route":"/v1/tiles"`)
	assert.Contains(t, logs, `"request_id"`)
}

// inFlightClient sends a request's body only once the server has begun reading it: the
// request says "Expect: 100-continue" (expectContinue), and the transport waits for the
// server's 100 Continue, sent when the handler first reads the body, before it reads the
// body from the caller. A test that streams a body through an io.Pipe knows, once its
// first Write returns, that the request is in flight.
var inFlightClient = &http.Client{Transport: &http.Transport{ExpectContinueTimeout: testBudget}}

// expectContinue marks req for inFlightClient.
func expectContinue(req *http.Request) *http.Request {
	req.Header.Set("Expect", "100-continue")
	return req
}

func TestShutdownDrainsAndFailsReadiness(t *testing.T) {
	base, cancel, done, _ := startServer(t, nil, "-shutdown-timeout", "5s")
	// Hold a connection busy with a slow body so the drain has something to wait for.
	pr, pw := io.Pipe()
	result := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/tiles", pr)
		req.Header.Set("Content-Type", "application/json")
		resp, err := inFlightClient.Do(expectContinue(req))
		if err != nil {
			result <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		result <- resp.StatusCode
	}()
	_, err := pw.Write([]byte(`{"mesh":"x=2","shape":[4],`))
	require.NoError(t, err) // the server is reading the body: the request is in flight

	cancel()
	select {
	case err := <-done:
		t.Fatalf("run returned %v while a request was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	_, err = pw.Write([]byte(`"dtype":"f32","sharding":[[0]]}`))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	assert.Equal(t, http.StatusOK, <-result, "the in-flight request completes")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after the drain")
	}
}

func TestReadinessFailsWhileDraining(t *testing.T) {
	base, cancel, done, _ := startServer(t, nil, "-drain-delay", "2s")
	resp, _ := send(t, http.MethodGet, base+"/readyz", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	require.Eventually(t, func() bool {
		resp, body := send(t, http.MethodGet, base+"/readyz", "", nil)
		return resp.StatusCode == http.StatusServiceUnavailable &&
			strings.Contains(string(body), `"draining":"shutting down"`) &&
			resp.Header.Get("Content-Type") == "application/problem+json"
	}, time.Second, 10*time.Millisecond, "readyz answers 503 while draining")
	resp, _ = send(t, http.MethodGet, base+"/healthz", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "still alive while draining")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the drain")
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{"defaults", nil, nil, "", func(t *testing.T, c config) {
			assert.Equal(t, ":8080", c.Addr)
			assert.Equal(t, int64(1<<20), c.MaxBodyBytes)
			assert.Equal(t, 65536, c.MaxDevices)
			assert.Equal(t, 16, c.MaxRank)
			assert.Equal(t, 8, c.MaxMeshAxes)
			assert.Equal(t, 1024, c.ListDeviceLimit)
			assert.Equal(t, 10*time.Second, c.RequestTimeout)
			assert.Equal(t, 400, c.GCPercent)
			assert.Equal(t, int64(512<<20), c.memoryLimit())
		}},
		{"memory limit follows the cache", map[string]string{"SHARDPLAN_CACHE_MAX_BYTES": "1073741824"}, nil, "", func(t *testing.T, c config) {
			assert.Equal(t, int64(4<<30), c.memoryLimit())
		}},
		{"gc settings", map[string]string{"SHARDPLAN_GC_PERCENT": "200"}, []string{"-memory-limit", "268435456"}, "", func(t *testing.T, c config) {
			assert.Equal(t, 200, c.GCPercent)
			assert.Equal(t, int64(256<<20), c.memoryLimit())
		}},
		{"zero gc percent", map[string]string{"SHARDPLAN_GC_PERCENT": "0"}, nil, "SHARDPLAN_GC_PERCENT", nil},
		{"negative memory limit", nil, []string{"-memory-limit", "-1"}, "SHARDPLAN_MEMORY_LIMIT", nil},
		{"memory limit below the cache", map[string]string{"SHARDPLAN_MEMORY_LIMIT": "100000000"}, nil, "SHARDPLAN_MEMORY_LIMIT", nil},
		{"env", map[string]string{"SHARDPLAN_ADDR": ":9000", "SHARDPLAN_MAX_DEVICES": "256", "SHARDPLAN_REQUEST_TIMEOUT": "2s", "SHARDPLAN_LOG_FORMAT": "json"}, nil, "", func(t *testing.T, c config) {
			assert.Equal(t, ":9000", c.Addr)
			assert.Equal(t, 256, c.MaxDevices)
			assert.Equal(t, 2*time.Second, c.RequestTimeout)
			assert.Equal(t, "json", c.LogFormat)
		}},
		{"flag beats env", map[string]string{"SHARDPLAN_MAX_RANK": "4"}, []string{"-max-rank", "6"}, "", func(t *testing.T, c config) {
			assert.Equal(t, 6, c.MaxRank)
		}},
		{"bad int env", map[string]string{"SHARDPLAN_MAX_DEVICES": "lots"}, nil, "SHARDPLAN_MAX_DEVICES", nil},
		{"bad duration env", map[string]string{"SHARDPLAN_REQUEST_TIMEOUT": "10"}, nil, "SHARDPLAN_REQUEST_TIMEOUT", nil},
		{"negative drain delay", nil, []string{"-drain-delay", "-1s"}, "SHARDPLAN_DRAIN_DELAY", nil},
		{"zero limit", map[string]string{"SHARDPLAN_MAX_BODY_BYTES": "0"}, nil, "SHARDPLAN_MAX_BODY_BYTES", nil},
		{"bad log format", map[string]string{"SHARDPLAN_LOG_FORMAT": "xml"}, nil, "SHARDPLAN_LOG_FORMAT", nil},
		{"bad log level", nil, []string{"-log-level", "loud"}, "SHARDPLAN_LOG_LEVEL", nil},
		{"bad redis url", map[string]string{"REDIS_URL": "http://x"}, nil, "REDIS_URL", nil},
		{"bad flag", nil, []string{"-max-rank", "x"}, "max-rank", nil},
		{"unknown flag", nil, []string{"-nope"}, "nope", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

// TestApplyGC: the config's collector percentage and memory limit are applied unless
// GOGC or GOMEMLIMIT is set, and what is in effect is reported.
func TestApplyGC(t *testing.T) {
	percent, limit := readGC()
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
	c := defaultConfig()
	c.GCPercent, c.MemoryLimit = 300, 700<<20
	tests := []struct {
		name        string
		env         map[string]string
		wantPercent int
		wantLimit   int64
		fromConfig  [2]bool
	}{
		{"config", nil, 300, 700 << 20, [2]bool{true, true}},
		{"GOGC set", map[string]string{"GOGC": "123"}, 123, 700 << 20, [2]bool{false, true}},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 300, 900 << 20, [2]bool{true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// What the runtime would have read from the variables at start.
			debug.SetGCPercent(123)
			debug.SetMemoryLimit(900 << 20)
			got := applyGC(c, func(k string) string { return tc.env[k] })
			assert.Equal(t, gcSettings{Percent: tc.wantPercent, PercentFromConfig: tc.fromConfig[0], MemoryLimit: tc.wantLimit, LimitFromConfig: tc.fromConfig[1]}, got)
			p, l := readGC()
			assert.Equal(t, tc.wantPercent, p, "in effect")
			assert.Equal(t, tc.wantLimit, l, "in effect")
		})
	}
}

func TestStartupErrors(t *testing.T) {
	var stdout, stderr lockedBuffer
	err := run(t.Context(), nil, func(k string) string {
		return map[string]string{"SHARDPLAN_MAX_RANK": "-1"}[k]
	}, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SHARDPLAN_MAX_RANK")

	err = run(t.Context(), []string{"-addr", "256.0.0.1:http"}, func(string) string { return "" }, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SHARDPLAN_ADDR")
}

func TestConfigPrintedWithoutSecrets(t *testing.T) {
	base, cancel, done, stderr := startServer(t, map[string]string{"REDIS_URL": "redis://user:hunter2@localhost:6379/0"})
	_ = base
	cancel()
	require.NoError(t, <-done)
	logs := stderr.String()
	assert.NotContains(t, logs, "hunter2")
	assert.Contains(t, logs, "SHARDPLAN_MAX_DEVICES=65536")
	assert.Contains(t, logs, "redis://user:xxxxx@localhost:6379/0")
}

// TestShutdownAnswersTheRest: a request still in flight when SHARDPLAN_SHUTDOWN_TIMEOUT
// passes (here: its body is still arriving) is answered 503 shutting-down, not dropped,
// and run returns nil (exit 0).
func TestShutdownAnswersTheRest(t *testing.T) {
	base, cancel, done, stderr := startServer(t, nil, "-shutdown-timeout", "300ms")
	pr, pw := io.Pipe()
	defer pw.Close()
	type answer struct {
		status int
		ctype  string
		body   string
	}
	result := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/reshard", pr)
		req.Header.Set("Content-Type", "application/json")
		resp, err := inFlightClient.Do(expectContinue(req))
		if err != nil {
			result <- answer{status: -1, body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
	}()
	_, err := pw.Write([]byte(`{"mesh":"x=2",`))
	require.NoError(t, err) // in flight: the server reads the body and waits for the rest

	cancel()
	a := <-result
	assert.Equal(t, http.StatusServiceUnavailable, a.status, a.body)
	assert.Equal(t, "application/problem+json", a.ctype)
	assert.Contains(t, a.body, "shutting-down")
	select {
	case err := <-done:
		require.NoError(t, err, "exit 0: every request was answered")
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return")
	}
	assert.Contains(t, stderr.String(), "answering the requests still in flight 503")
}
