package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusedRequestsAnswerProblems sends a real server requests net/http refuses before
// any handler sees them: each answer keeps net/http's status and comes as problem+json.
func TestRefusedRequestsAnswerProblems(t *testing.T) {
	base, _, _, _ := startServer(t, nil)
	addr := strings.TrimPrefix(base, "http://")
	tests := []struct {
		name   string
		raw    string
		status int
		slug   string
		detail string // a part of the detail
	}{
		{"header fields over the limit", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 80<<10) + "\r\n\r\n",
			http.StatusRequestHeaderFieldsTooLarge, "headers-too-large", "65536 bytes"},
		{"a Content-Type line without its colon", "POST /v1/reshard HTTP/1.1\r\nHost: x\r\nContent-Type application/json\r\nContent-Length: 2\r\n\r\n{}",
			http.StatusBadRequest, "unreadable-request", "400 Bad Request"},
		{"a control character in Content-Type", "POST /v1/reshard HTTP/1.1\r\nHost: x\r\nContent-Type: appl\x01ication/json\r\nContent-Length: 2\r\n\r\n{}",
			http.StatusBadRequest, "unreadable-request", "400 Bad Request"},
		{"no Host", "GET /healthz HTTP/1.1\r\n\r\n",
			http.StatusBadRequest, "unreadable-request", "missing required Host header"},
		{"a malformed Host", "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n",
			http.StatusBadRequest, "unreadable-request", "malformed Host header"},
		{"two Content-Lengths", "POST /v1/reshard HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}",
			http.StatusBadRequest, "unreadable-request", "400 Bad Request"},
		{"an unknown transfer encoding", "POST /v1/reshard HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
			http.StatusNotImplemented, "unreadable-request", "Unsupported transfer encoding"},
		{"an unknown protocol version", "GET /healthz HTTP/9.1\r\nHost: x\r\n\r\n",
			http.StatusHTTPVersionNotSupported, "unreadable-request", "unsupported protocol version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(testBudget)))
			_, err = io.WriteString(c, tc.raw)
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode, "%s", body)
			assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			assert.True(t, resp.Close, "the connection closes")
			var p struct {
				Type   string `json:"type"`
				Title  string `json:"title"`
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			require.NoError(t, json.Unmarshal(body, &p), "%s", body)
			assert.Equal(t, "https://shardplan.dev/problems/"+tc.slug, p.Type)
			assert.Equal(t, tc.status, p.Status)
			assert.Equal(t, http.StatusText(tc.status), p.Title)
			assert.Contains(t, p.Detail, tc.detail)
		})
	}
	// The connection wrapper leaves every other answer as it was.
	resp, body := send(t, http.MethodGet, base+"/healthz", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}
