package api

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// Content negotiation: every route says which media types it answers (offers), and a
// request whose Accept admits none of them is a 406 not-acceptable naming them. A missing
// Accept admits everything; problem+json errors are answered whatever Accept says.

// Media types the routes take or answer besides JSON.
const (
	svgMediaType  = "image/svg+xml"
	textMediaType = "text/plain"
	htmlMediaType = "text/html"
	// mlirMediaType is a StableHLO module's text (POST /v1/graph and /v1/audit take it;
	// /v1/graph answers the annotated module in it).
	mlirMediaType = "application/mlir"
	// hloMediaType is a compiled HLO module's text (POST /v1/audit takes it).
	hloMediaType = "text/x-hlo"
)

// acceptRange is one media range of an Accept header and its weight.
type acceptRange struct {
	typ, sub string
	q        float64
}

// parseAccept reads an Accept header's media ranges; a malformed range is skipped.
func parseAccept(h string) []acceptRange {
	var out []acceptRange
	for _, part := range strings.Split(h, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		out = append(out, acceptRange{typ: typ, sub: sub, q: q})
	}
	return out
}

// acceptQuality is the weight Accept h gives media type mt (the most specific range
// that matches decides, as RFC 9110 says); 1 when h is empty, 0 when nothing matches.
func acceptQuality(h, mt string) float64 {
	if strings.TrimSpace(h) == "" {
		return 1
	}
	typ, sub, _ := strings.Cut(mt, "/")
	best, q := -1, 0.0
	for _, r := range parseAccept(h) {
		spec := -1
		switch {
		case r.typ == typ && r.sub == sub:
			spec = 2
		case r.typ == typ && r.sub == "*":
			spec = 1
		case r.typ == "*" && r.sub == "*":
			spec = 0
		}
		if spec > best {
			best, q = spec, r.q
		}
	}
	return q
}

// preferred is the offered type Accept h weighs highest (the first offered on a tie),
// or "" when it admits none.
func preferred(h string, offered ...string) string {
	best, bestQ := "", 0.0
	for _, mt := range offered {
		if q := acceptQuality(h, mt); q > bestQ {
			best, bestQ = mt, q
		}
	}
	return best
}

// offers answers 406 to a request whose Accept admits none of types.
func (s *Server) offers(types ...string) func(http.Handler) http.Handler {
	list := strings.Join(types, ", ")
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if preferred(r.Header.Get("Accept"), types...) == "" {
				s.writeProblem(w, r, NewProblem(http.StatusNotAcceptable, slugNotAcceptable, "Not acceptable",
					"Accept %q admits none of what %s answers: %s", r.Header.Get("Accept"), r.URL.Path, list))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// wantsSVG reports whether Accept prefers image/svg+xml over the route's other answers.
func wantsSVG(r *http.Request, others ...string) bool {
	return preferred(r.Header.Get("Accept"), append([]string{svgMediaType}, others...)...) == svgMediaType &&
		acceptQuality(r.Header.Get("Accept"), svgMediaType) > acceptQuality(r.Header.Get("Accept"), "application/json")
}

// wantsText reports whether Accept asks for text/plain and not JSON.
func wantsText(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "text/plain") && !strings.Contains(a, "application/json")
}

// isMLIR reports whether r's body is MLIR text.
func isMLIR(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == mlirMediaType
}

// wantsMLIR reports whether Accept asks for application/mlir.
func wantsMLIR(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), mlirMediaType)
}
