package api

import (
	_ "embed" // the explorer page's assets are compiled into the binary
	"net/http"
)

// The mesh explorer served at GET /explore (explorer/): plain JavaScript and SVG, embedded
// so that the binary serves it with no network access. It calls /v1/tiles, /v1/reshard
// and /v1/graph on this server and draws the mesh, the tensor's tiles on it, and a plan
// step by step.
var (
	//go:embed explorer/index.html
	exploreIndexHTML []byte
	//go:embed explorer/explore.js
	exploreJS []byte
	//go:embed explorer/explore.css
	exploreCSS []byte
)

var (
	exploreIndex = newDocsFile("text/html; charset=utf-8", exploreIndexHTML)
	// exploreAssets are the files served under /explore/{asset}; any other name is a 404.
	exploreAssets = map[string]docsFile{
		"explore.js":  newDocsFile("text/javascript; charset=utf-8", exploreJS),
		"explore.css": newDocsFile("text/css; charset=utf-8", exploreCSS),
		"icon.svg":    newDocsFile("image/svg+xml", docsIconSVG),
	}
)

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
	serveDocsFile(w, r, exploreIndex)
	return nil
}
