// Package ui holds shardplan's two web pages, embedded so that the binary serves them
// with no network access: the API explorer at GET /docs (docsui/: it fetches
// /openapi.json and calls the API from the browser) and the mesh explorer at GET
// /explore (explorer/: plain JavaScript and SVG; it calls /v1/tiles, /v1/reshard,
// /v1/graph and /v1/transfer and draws the mesh, the tensor's tiles on it, a plan step by
// step and a transfer's placements and flows). Every
// URL they use is relative to the server that serves them.
package ui

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the pages' assets are compiled into the binary
	"encoding/hex"
	"net/http"
	"time"
)

var (
	//go:embed docsui/index.html
	docsIndexHTML []byte
	//go:embed docsui/app.js
	docsAppJS []byte
	//go:embed docsui/style.css
	docsStyleCSS []byte
	//go:embed docsui/icon.svg
	iconSVG []byte

	//go:embed explorer/index.html
	exploreIndexHTML []byte
	//go:embed explorer/explore.js
	exploreJS []byte
	//go:embed explorer/explore.css
	exploreCSS []byte
)

// CSP is the Content-Security-Policy of the pages and their assets: scripts, styles,
// images and fetches from this origin only, no inline script or style, no plugins, no
// framing, no form posts.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'none'; frame-ancestors 'none'"

// File is one embedded file with its content type and strong ETag.
type File struct {
	contentType string
	body        []byte
	etag        string
}

func newFile(contentType string, body []byte) File {
	sum := sha256.Sum256(body)
	return File{contentType: contentType, body: body, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

// Page is a page's HTML and the assets it loads from beside it.
type Page struct {
	// Index is the page itself.
	Index File
	// Assets are the files served under the page's path by name; any other name is a
	// 404.
	Assets map[string]File
}

var (
	// Docs is the API explorer served at GET /docs.
	Docs = Page{
		Index: newFile("text/html; charset=utf-8", docsIndexHTML),
		Assets: map[string]File{
			"app.js":    newFile("text/javascript; charset=utf-8", docsAppJS),
			"style.css": newFile("text/css; charset=utf-8", docsStyleCSS),
			"icon.svg":  newFile("image/svg+xml", iconSVG),
		},
	}
	// Explore is the mesh explorer served at GET /explore.
	Explore = Page{
		Index: newFile("text/html; charset=utf-8", exploreIndexHTML),
		Assets: map[string]File{
			"explore.js":  newFile("text/javascript; charset=utf-8", exploreJS),
			"explore.css": newFile("text/css; charset=utf-8", exploreCSS),
			"icon.svg":    newFile("image/svg+xml", iconSVG),
		},
	}
)

// Serve writes f with the pages' security headers. The ETag lets browsers revalidate
// (304) instead of caching a page that changes with the binary.
func Serve(w http.ResponseWriter, r *http.Request, f File) {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
