package api

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/shardplan/shardplan/api/ui"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pages' policy and the assets the server embeds.
var (
	docsCSP      = ui.CSP
	docsAppJS    = mustRead("ui/docsui/app.js")
	docsStyleCSS = mustRead("ui/docsui/style.css")
	exploreJS    = mustRead("ui/explorer/explore.js")
	exploreCSS   = mustRead("ui/explorer/explore.css")
)

func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}

func TestDocsServed(t *testing.T) {
	s := newTestServer(t, nil)
	tests := []struct {
		name        string
		path        string
		contentType string
		contains    string
	}{
		{"page", "/docs", "text/html; charset=utf-8", `<script src="docs/app.js"`},
		{"script", "/docs/app.js", "text/javascript; charset=utf-8", "openapi2.json"},
		{"styles", "/docs/style.css", "text/css; charset=utf-8", ".try"},
		{"icon", "/docs/icon.svg", "image/svg+xml", "<svg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, http.MethodGet, tc.path, "", "")
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			h := rec.Header()
			assert.Equal(t, tc.contentType, h.Get("Content-Type"))
			assert.Equal(t, docsCSP, h.Get("Content-Security-Policy"))
			assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
			assert.NotEmpty(t, h.Get("ETag"))
			assert.Contains(t, rec.Body.String(), tc.contains)

			// A browser revalidating with the ETag gets a 304 and no body.
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tc.path, nil)
			require.NoError(t, err)
			req.Header.Set("If-None-Match", h.Get("ETag"))
			rec304 := httptest.NewRecorder()
			s.ServeHTTP(rec304, req)
			assert.Equal(t, http.StatusNotModified, rec304.Code)
			assert.Empty(t, rec304.Body.String())
		})
	}
}

func TestDocsCSPIsStrict(t *testing.T) {
	directives := map[string]string{}
	for d := range strings.SplitSeq(docsCSP, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	assert.Equal(t, "'self'", directives["default-src"])
	assert.Equal(t, "'self'", directives["script-src"])
	assert.Equal(t, "'self'", directives["connect-src"])
	assert.Equal(t, "'none'", directives["frame-ancestors"])
	assert.NotContains(t, docsCSP, "unsafe-inline")
	assert.NotContains(t, docsCSP, "unsafe-eval")
	assert.NotContains(t, docsCSP, "http")
}

func TestDocsUnknownAsset(t *testing.T) {
	s := newTestServer(t, nil)
	for _, path := range []string{"/docs/nope.js", "/docs/index.html", "/docs/..%2fhealth.go"} {
		rec := do(t, s, http.MethodGet, path, "", "")
		assert.Equal(t, http.StatusNotFound, rec.Code, path)
		assert.Equal(t, ProblemContentType, rec.Header().Get("Content-Type"), path)
	}
}

var (
	externalURLRE = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+`)
	scriptTagRE   = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`)
	refAttrRE     = regexp.MustCompile(`(?i)\b(?:src|href)="([^"]*)"`)
	inlineAttrRE  = regexp.MustCompile(`(?i)\s(?:on[a-z]+|style)=`)
)

// TestDocsSelfContained checks the docs and explorer pages load nothing from elsewhere
// and nothing inline, so they work offline under their Content-Security-Policy.
func TestDocsSelfContained(t *testing.T) {
	s := newTestServer(t, func(d *Deps) {
		d.OpenAPI = []byte(`{"swagger":"2.0"}`)
		d.OpenAPI3 = []byte(`{"openapi":"3.0.3"}`)
	})
	pages := []struct {
		path   string
		assets map[string]string
	}{
		{"/docs", map[string]string{"app.js": string(docsAppJS), "style.css": string(docsStyleCSS)}},
		{"/explore", map[string]string{"explore.js": string(exploreJS), "explore.css": string(exploreCSS)}},
	}
	for _, pg := range pages {
		rec := do(t, s, http.MethodGet, pg.path, "", "")
		require.Equal(t, http.StatusOK, rec.Code, pg.path)
		assert.Equal(t, docsCSP, rec.Header().Get("Content-Security-Policy"), pg.path)
		html := rec.Body.String()
		pg.assets["index.html"] = html
		for name, body := range pg.assets {
			// The SVG namespace is a name, not a place anything is fetched from.
			body = strings.ReplaceAll(body, `"http://www.w3.org/2000/svg"`, `""`)
			assert.Empty(t, externalURLRE.FindAllString(body, -1), "%s%s references another origin", pg.path, name)
			assert.NotContains(t, body, "@import", name)
		}

		scripts := scriptTagRE.FindAllStringSubmatch(html, -1)
		require.NotEmpty(t, scripts)
		for _, m := range scripts {
			assert.Contains(t, m[1], "src=", "inline script: %s", m[0])
			assert.Empty(t, strings.TrimSpace(m[2]), "inline script: %s", m[0])
		}
		assert.Empty(t, inlineAttrRE.FindAllString(html, -1), "inline handlers or styles are blocked by the CSP")

		// Every relative reference resolves, from the page, to something this server answers.
		page, err := url.Parse("http://service.test" + pg.path)
		require.NoError(t, err)
		refs := refAttrRE.FindAllStringSubmatch(html, -1)
		require.NotEmpty(t, refs)
		for _, m := range refs {
			if strings.HasPrefix(m[1], "#") {
				continue
			}
			ref, err := url.Parse(m[1])
			require.NoError(t, err, m[1])
			assert.Empty(t, ref.Host, "absolute reference %s", m[1])
			target := page.ResolveReference(ref)
			rec := do(t, s, http.MethodGet, target.Path, "", "")
			assert.Equal(t, http.StatusOK, rec.Code, "%s: %s -> %s", pg.path, m[1], target.Path)
		}
	}
}
