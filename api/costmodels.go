package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/shardplan/shardplan/internal/cost"
)

// CostModelList is the answer of GET /v1/cost-models.
type CostModelList struct {
	Default string      `json:"default" example:"tpu-v5p"`
	Models  []CostModel `json:"models"`
} // @name CostModelList

// costModels godoc
//
//	@Summary		List the built-in bandwidth profiles
//	@Description	Every built-in cost model with its link classes, bandwidths, latencies, topology rules and the source of each figure. A request's `cost_model` names one of these or passes an object (a base profile plus overrides, or a fully custom model).
//	@Tags			cost
//	@Produce		json
//	@Success		200	{object}	CostModelList
//	@Router			/v1/cost-models [get]
func (s *Server) costModels(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, CostModelList{Default: cost.DefaultProfile, Models: wireList(cost.Profiles(), costModelOf)})
}

// costModel godoc
//
//	@Summary		One built-in bandwidth profile
//	@Tags			cost
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			name	path		string	true	"profile name or alias"	example(tpu-v5p)
//	@Success		200		{object}	CostModel
//	@Failure		404		{object}	Problem	"no such profile"
//	@Router			/v1/cost-models/{name} [get]
func (s *Server) costModel(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	p, ok := cost.Lookup(name)
	if !ok {
		return NewProblem(http.StatusNotFound, slugNotFound, "Not found", "no cost model named %q; GET /v1/cost-models lists them", name)
	}
	return writeJSON(w, http.StatusOK, costModelOf(p))
}
