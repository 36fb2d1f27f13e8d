package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
)

// Access control, off by default: API keys on /v1 (and on /metrics when it is served on
// the API's address), and a CORS allow-list for browsers on other origins (the docs page
// hosted elsewhere). Keys are compared in constant time against every configured key
// (several keys allow rotation) and are never logged: logs and rate limits see keyID's
// short hash only.

// Access configures access control. The zero value is open: no keys, no CORS.
type Access struct {
	// APIKeys, when non-empty, are the keys a /v1 request must present as
	// "Authorization: Bearer <key>" or "X-API-Key: <key>" (401 otherwise).
	APIKeys []string
	// CORSOrigins are the origins ("https://docs.example.com") allowed to call the API
	// from a browser; "*" allows any origin.
	CORSOrigins []string
	// MetricsElsewhere leaves /metrics off the API's router (it is served on its own
	// listener, see Server.Metrics).
	MetricsElsewhere bool
}

// keyHashes are the SHA-256 sums of the configured keys: comparing sums keeps the
// compare constant-time in the key's length too.
type keyHashes [][sha256.Size]byte

func newKeyHashes(keys []string) keyHashes {
	out := make(keyHashes, 0, len(keys))
	for _, k := range keys {
		out = append(out, sha256.Sum256([]byte(k)))
	}
	return out
}

// match reports whether key is one of the keys, comparing against every one.
func (h keyHashes) match(key string) bool {
	sum := sha256.Sum256([]byte(key))
	found := 0
	for i := range h {
		found |= subtle.ConstantTimeCompare(sum[:], h[i][:])
	}
	return found == 1
}

// presentedKey is the key a request carries: a Bearer token, else X-API-Key.
func presentedKey(r *http.Request) (string, bool) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, token, ok := strings.Cut(auth, " ")
		if ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
			return strings.TrimSpace(token), true
		}
	}
	// Another scheme (Basic credentials a proxy adds) does not hide an X-API-Key.
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k, true
	}
	return "", false
}

// requireAPIKey answers 401 to a request without one of the configured keys, and puts
// the key's id on the context for rate limits. No keys configured: open.
func (s *Server) requireAPIKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.keys) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		key, ok := presentedKey(r)
		if !ok || !s.keys.match(key) {
			// Failed attempts count against the client's address, so keys cannot be
			// guessed faster than the rate limit.
			if p := s.overRate(r); p != nil {
				s.writeProblem(w, r, p)
				return
			}
			detail := "this API needs a key: send Authorization: Bearer <key> or X-API-Key: <key>"
			if ok {
				detail = "the API key is not valid (it may have been rotated out); send a current key as Authorization: Bearer <key> or X-API-Key: <key>"
			}
			s.writeProblem(w, r, NewProblem(http.StatusUnauthorized, slugUnauthorized, "Unauthorized", "%s", detail).
				WithHeader("WWW-Authenticate", `Bearer realm="shardplan"`))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), apiKeyIDKey{}, keyID(key))))
	})
}

// CORS: the headers a browser may send and read.
const (
	corsAllowHeaders  = "Authorization, Content-Type, X-API-Key, X-Request-Id"
	corsExposeHeaders = "Retry-After, X-Cache, X-Request-Id"
	corsAllowMethods  = "GET, POST, OPTIONS"
)

// cors adds CORS headers for allowed origins and answers their preflight requests (204,
// before routing and authentication: a preflight carries no credentials). Requests from
// other origins get no CORS headers, so browsers refuse to hand them the answer.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || len(s.access.CORSOrigins) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if !slices.Contains(s.access.CORSOrigins, "*") && !slices.Contains(s.access.CORSOrigins, origin) {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", corsAllowMethods)
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		next.ServeHTTP(w, r)
	})
}
