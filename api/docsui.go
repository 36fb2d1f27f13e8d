package api

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the docs page's assets are compiled into the binary
	"encoding/hex"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
)

// The API explorer served at GET /docs: our own page (docsui/), embedded so the binary
// serves it with no network access. It fetches /openapi.json and calls the API from the
// browser; every URL it uses is relative to this server.
var (
	//go:embed docsui/index.html
	docsIndexHTML []byte
	//go:embed docsui/app.js
	docsAppJS []byte
	//go:embed docsui/style.css
	docsStyleCSS []byte
	//go:embed docsui/icon.svg
	docsIconSVG []byte
)

// docsCSP is the Content-Security-Policy of the docs page and its assets: scripts, styles,
// images and fetches from this origin only, no inline script or style, no plugins, no
// framing, no form posts.
const docsCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'none'; frame-ancestors 'none'"

// docsFile is one embedded asset with its content type and strong ETag.
type docsFile struct {
	contentType string
	body        []byte
	etag        string
}

func newDocsFile(contentType string, body []byte) docsFile {
	sum := sha256.Sum256(body)
	return docsFile{contentType: contentType, body: body, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

var (
	docsIndex = newDocsFile("text/html; charset=utf-8", docsIndexHTML)
	// docsAssets are the files served under /docs/{asset}; any other name is a 404.
	docsAssets = map[string]docsFile{
		"app.js":    newDocsFile("text/javascript; charset=utf-8", docsAppJS),
		"style.css": newDocsFile("text/css; charset=utf-8", docsStyleCSS),
		"icon.svg":  newDocsFile("image/svg+xml", docsIconSVG),
	}
)

// docs godoc
//
//	@Summary		API explorer
//	@Description	An interactive page that lists the operations of /openapi.json by tag, shows their parameters and request schemas with example bodies, and sends requests to this server ("Try it"). Its script and styles are embedded in the binary and served under /docs/; it loads nothing from other origins (strict Content-Security-Policy).
//	@Tags			ops
//	@Produce		html
//	@Success		200	{string}	string
//	@Router			/docs [get]
func (s *Server) docs(w http.ResponseWriter, r *http.Request) error {
	serveDocsFile(w, r, docsIndex)
	return nil
}

// pageAssets serves the script, stylesheet and icon of the page at page (GET
// page/{asset}); any other name is a 404.
func pageAssets(page string, assets map[string]docsFile) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		name := chi.URLParam(r, "asset")
		f, ok := assets[name]
		if !ok {
			return NewProblem(http.StatusNotFound, slugNotFound, "Not found", "no asset %q; the page is at GET %s", name, page)
		}
		serveDocsFile(w, r, f)
		return nil
	}
}

// serveDocsFile writes f with the docs security headers. The ETag lets browsers revalidate
// (304) instead of caching a page that changes with the binary.
func serveDocsFile(w http.ResponseWriter, r *http.Request, f docsFile) {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Content-Security-Policy", docsCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
