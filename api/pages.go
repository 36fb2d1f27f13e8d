package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/shardplan/shardplan/api/ui"
)

// GET /docs and GET /explore: the two web pages (package ui) and their assets.

// docs godoc
//
//	@Summary		API explorer
//	@Description	An interactive page that lists the operations of /openapi.json by tag, shows their parameters and request schemas with example bodies, and sends requests to this server ("Try it"). Its script and styles are embedded in the binary and served under /docs/; it loads nothing from other origins (strict Content-Security-Policy).
//	@Tags			ops
//	@Produce		html
//	@Success		200	{string}	string
//	@Router			/docs [get]
func (s *Server) docs(w http.ResponseWriter, r *http.Request) error {
	ui.Serve(w, r, ui.Docs.Index)
	return nil
}

// explore godoc
//
//	@Summary		Mesh and plan explorer
//	@Description	An interactive page: paste a mesh, a tensor and shardings as the frameworks print them (or pick an example) and see the mesh as nested grids, the tensor coloured by owning device for the source and the target (tile ranges on hover), and the plan step by step (arrows for point-to-point moves, outlines for collective groups, bytes and time per step against the lower bound); a graph or StableHLO module lists its ops, shardings and reshards. Every sharding can be copied as P(...), NamedSharding, HloSharding, Shardy text or DTensor placements. Its script and styles are embedded and served under /explore/; it loads nothing from other origins.
//	@Tags			ops
//	@Produce		html
//	@Success		200	{string}	string
//	@Failure		406	{object}	Problem	"Accept admits no HTML"
//	@Router			/explore [get]
func (s *Server) explore(w http.ResponseWriter, r *http.Request) error {
	ui.Serve(w, r, ui.Explore.Index)
	return nil
}

// pageAssets serves the script, stylesheet and icon of the page at path (GET
// path/{asset}); any other name is a 404.
func pageAssets(path string, page ui.Page) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		name := chi.URLParam(r, "asset")
		f, ok := page.Assets[name]
		if !ok {
			return NewProblem(http.StatusNotFound, slugNotFound, "Not found", "no asset %q; the page is at GET %s", name, path)
		}
		ui.Serve(w, r, f)
		return nil
	}
}
