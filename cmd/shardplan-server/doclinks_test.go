package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// mdLinkRE is a Markdown link's target: [text](target).
	mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// mdFileRE is a repository file named in code spans: `docs/COSTMODEL.md`.
	mdFileRE = regexp.MustCompile("`((?:docs|clients|examples|scripts|api|internal|cmd|openapi)/[A-Za-z0-9_./-]+)`")
)

// TestDocLinksResolve checks that every relative link of the repository's Markdown pages
// and every repository path they name in code spans exists.
func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	var pages []string
	for _, pattern := range []string{"*.md", "docs/*.md", "clients/python/*.md"} {
		found, err := filepath.Glob(filepath.Join(root, pattern))
		require.NoError(t, err)
		for _, f := range found {
			rel, err := filepath.Rel(root, f)
			require.NoError(t, err)
			pages = append(pages, rel)
		}
	}
	require.Contains(t, pages, "README.md")
	for _, page := range pages {
		raw, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err, page)
		text := string(raw)
		dir := filepath.Dir(page)
		for _, m := range mdLinkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			_, err := os.Stat(filepath.Join(root, dir, target))
			assert.NoError(t, err, "%s links to %s, which is not in the repository", page, m[1])
		}
		for _, m := range mdFileRE.FindAllStringSubmatch(text, -1) {
			path := strings.TrimSuffix(m[1], "/")
			if strings.ContainsAny(path, "*{}") {
				continue
			}
			_, err := os.Stat(filepath.Join(root, path))
			assert.NoError(t, err, "%s names %s, which is not in the repository", page, m[1])
		}
	}
}
