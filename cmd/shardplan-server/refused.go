package main

import (
	"bytes"
	"net"
	"strconv"

	"github.com/shardplan/shardplan/api"
)

// Requests net/http refuses itself. Before a request reaches any handler, net/http answers
// what it cannot read (header fields over MaxHeaderBytes: 431; a malformed request line,
// header line or Host: 400; an unknown transfer encoding: 501; an unknown protocol
// version: 505) by writing a plain-text response straight to the connection and closing
// it. refusedListener's connections recognise that write and send the same status as
// application/problem+json instead, like every other answer of the service.
//
// The recognised write is one Write of "HTTP/1.1 <status line>" followed by exactly
// net/http's error headers and its text; a response a handler writes always carries a
// Date header, so it is never taken for one. Behind TLS the connection net/http writes to
// is the TLS one, which this does not wrap: there the plain-text answers stay.

// netHTTPErrorHeaders are the headers net/http writes with the answers it writes itself.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// refusedListener wraps its connections in refusedConns.
type refusedListener struct {
	net.Listener
	headerLimit int // the server's MaxHeaderBytes, named by a 431
}

func (l refusedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return &refusedConn{Conn: c, headerLimit: l.headerLimit}, nil
}

// refusedConn is a connection whose net/http-written refusals go out as problem+json.
type refusedConn struct {
	net.Conn
	headerLimit int
}

func (c *refusedConn) Write(b []byte) (int, error) {
	answer, ok := refusedAnswer(b, c.headerLimit)
	if !ok {
		return c.Conn.Write(b)
	}
	if _, err := c.Conn.Write(answer); err != nil {
		return 0, err
	}
	return len(b), nil
}

// CloseWrite half-closes the connection, as net/http does after a refusal so the client
// reads it before the connection resets.
func (c *refusedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// refusedAnswer is the problem+json response in place of b when b is a refusal net/http
// wrote itself.
func refusedAnswer(b []byte, headerLimit int) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte("HTTP/1.1 "))
	if !ok {
		return nil, false
	}
	line, text, ok := bytes.Cut(rest, []byte(netHTTPErrorHeaders))
	if !ok || len(line) < 4 || line[3] != ' ' || bytes.ContainsAny(line, "\r\n") {
		return nil, false
	}
	status, err := strconv.Atoi(string(line[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	reason := string(text)
	if reason == "" {
		reason = string(line[4:])
	}
	body := api.RefusedRequestProblem(status, reason, headerLimit)
	out := make([]byte, 0, len(line)+len(body)+160)
	out = append(out, "HTTP/1.1 "...)
	out = append(out, line...)
	out = append(out, "\r\nContent-Type: "+api.ProblemContentType+"\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n"...)
	return append(out, body...), true
}
