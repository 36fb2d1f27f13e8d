package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendWith is send with extra request headers.
func sendWith(t *testing.T, client *http.Client, method, url, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if rd != nil {
		req, err = http.NewRequestWithContext(t.Context(), method, url, rd)
		req.Header.Set("Content-Type", "application/json")
	}
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp, b.String()
}

func TestAPIKeys(t *testing.T) {
	const (
		current  = "sk-current-0123456789abcdef"
		previous = "sk-previous-0123456789abcdef"
		fromFile = "sk-file-0123456789abcdef0123"
	)
	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte("# rotated monthly\n"+fromFile+"\n\n"), 0o600))
	base, _, _, stderr := startServer(t, map[string]string{
		"SHARDPLAN_API_KEYS":      current + ", " + previous,
		"SHARDPLAN_API_KEYS_FILE": file,
		"SHARDPLAN_LOG_LEVEL":     "debug",
	})
	c := http.DefaultClient
	tests := []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"no key", nil, http.StatusUnauthorized},
		{"wrong key", map[string]string{"Authorization": "Bearer sk-wrong-0123456789abcdef"}, http.StatusUnauthorized},
		{"wrong scheme", map[string]string{"Authorization": "Basic " + current}, http.StatusUnauthorized},
		{"a prefix of a key", map[string]string{"X-API-Key": current[:20]}, http.StatusUnauthorized},
		{"bearer", map[string]string{"Authorization": "Bearer " + current}, http.StatusOK},
		{"previous key still valid", map[string]string{"X-API-Key": previous}, http.StatusOK},
		{"key from the file", map[string]string{"authorization": "bearer " + fromFile}, http.StatusOK},
		{"basic credentials beside a key", map[string]string{"Authorization": "Basic dXNlcjpwdw==", "X-API-Key": current}, http.StatusOK},
		{"a wrong bearer wins over a key", map[string]string{"Authorization": "Bearer sk-wrong-0123456789abcdef", "X-API-Key": current}, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := sendWith(t, c, http.MethodPost, base+"/v1/reshard", reshardArray, tc.headers)
			assert.Equal(t, tc.status, resp.StatusCode, body)
			if tc.status == http.StatusUnauthorized {
				assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
				assert.Contains(t, body, `"type":"https://shardplan.dev/problems/unauthorized"`)
				assert.Equal(t, `Bearer realm="shardplan"`, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	resp, _ := sendWith(t, c, http.MethodGet, base+"/healthz", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "probes need no key")
	for _, path := range []string{"/v1/cost-models", "/v1/cost-models/h100"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			resp, _ = sendWith(t, c, method, base+path, "", nil)
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s needs a key like every /v1 route", method, path)
			resp, _ = sendWith(t, c, method, base+path, "", map[string]string{"X-API-Key": current})
			assert.Equal(t, http.StatusOK, resp.StatusCode, "%s %s", method, path)
		}
	}
	resp, _ = sendWith(t, c, http.MethodGet, base+"/metrics", "", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "metrics on the API address need a key")
	resp, _ = sendWith(t, c, http.MethodGet, base+"/metrics", "", map[string]string{"X-API-Key": current})
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	logs := stderr.String()
	require.Contains(t, logs, "SHARDPLAN_API_KEYS")
	for _, k := range []string{current, previous, fromFile, current[:20], "sk-wrong"} {
		assert.NotContains(t, logs, k, "keys are never logged")
	}
}

func TestAPIKeysConfigErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("# nothing\n"), 0o600))
	for name, env := range map[string]map[string]string{
		"short key":  {"SHARDPLAN_API_KEYS": "tooshort"},
		"empty file": {"SHARDPLAN_API_KEYS_FILE": empty},
		"no file":    {"SHARDPLAN_API_KEYS_FILE": filepath.Join(dir, "absent")},
		"cert alone": {"SHARDPLAN_TLS_CERT": filepath.Join(dir, "cert.pem")},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(t.Context(), []string{"-addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, &lockedBuffer{}, &lockedBuffer{})
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "tooshort", "the error names the setting, not the key")
		})
	}
}

// selfSigned writes a fresh self-signed certificate for 127.0.0.1 and its key, and
// returns their paths and a pool trusting it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "shardplan test"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	base, _, _, _ := startServer(t, map[string]string{"SHARDPLAN_TLS_CERT": certFile, "SHARDPLAN_TLS_KEY": keyFile})
	secure := strings.Replace(base, "http://", "https://", 1)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(client.CloseIdleConnections)
	resp, body := sendWith(t, client, http.MethodPost, secure+"/v1/reshard", reshardArray, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotNil(t, resp.TLS)
	resp, _ = sendWith(t, http.DefaultClient, http.MethodGet, base+"/healthz", "", nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS port is refused")
}

var metricsRE = regexp.MustCompile(`metrics listening on (\S+)`)

func TestMetricsAddr(t *testing.T) {
	env := map[string]string{"SHARDPLAN_METRICS_ADDR": "127.0.0.1:0", "SHARDPLAN_API_KEYS": "sk-metrics-test-0123456789"}
	ctx, cancel := context.WithCancel(t.Context())
	stdout := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, stdout, &lockedBuffer{})
	}()
	t.Cleanup(func() { cancel(); <-done })
	var base, maddr string
	require.Eventually(t, func() bool {
		out := stdout.String()
		m, a := metricsRE.FindStringSubmatch(out), listenRE.FindStringSubmatch(out)
		if m == nil || a == nil {
			return false
		}
		maddr, base = m[1], "http://"+a[1]
		return true
	}, 5*time.Second, 10*time.Millisecond)
	resp, body := sendWith(t, http.DefaultClient, http.MethodGet, "http://"+maddr+"/metrics", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.Contains(body, "shardplan_cache_requests_total"), "the service's registry is served")
	resp, _ = sendWith(t, http.DefaultClient, http.MethodGet, "http://"+maddr+"/debug/pprof/", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = sendWith(t, http.DefaultClient, http.MethodGet, base+"/metrics", "", map[string]string{"X-API-Key": env["SHARDPLAN_API_KEYS"]})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "metrics moved off the API address")
	resp, _ = sendWith(t, http.DefaultClient, http.MethodGet, base+"/debug/pprof/", "", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "no pprof on the API address")
}
