package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/nccltests"
	"github.com/shardplan/shardplan/internal/sharding"
)

// Limits of a fit: they bound its work (every point is priced at every step of the
// search, a sendrecv by routing each of its ranks' transfers), whatever the body limit.
const (
	maxFitPoints = 4096
	maxFitRanks  = 65536
)

// fitOutlier is the error past which a fitted point is listed as an outlier.
const fitOutlier = 0.25

// FitRequest is the body of POST /v1/cost-models/fit.
type FitRequest struct {
	// Base is the profile the fit starts from: a GPU profile name (h100, h200, b200,
	// gb200-nvl72, a100) or a cost_model object on one. Its links and topology are kept;
	// the fit moves the collectives figures the measurements cover.
	Base json.RawMessage `json:"base" validate:"required" swaggertype:"object"`
	// Name is the fitted model's name (default: the base's name with "-fitted").
	Name string `json:"name,omitempty" validate:"omitempty,max=64" example:"my-h100-cluster"`
	// Outputs are nccl-tests outputs as printed, one run each.
	Outputs []FitOutput `json:"outputs" validate:"required,min=1,max=64,dive"`
} // @name FitRequest

// FitOutput is one nccl-tests run, or a log of several.
type FitOutput struct {
	// Name names the run in the answer's points (e.g. its file name).
	Name string `json:"name,omitempty" validate:"omitempty,max=256" example:"all_reduce_2x8.txt"`
	// Text is the output as all_gather_perf, reduce_scatter_perf, all_reduce_perf,
	// alltoall_perf or sendrecv_perf print it: the header, the "# Using devices" list
	// (its ranks and hosts give the group) and the size/count/type/time/algbw/busbw
	// table. Lines such as "# ranks: 16", "# nodes: 2", "# collective: all_reduce",
	// "# nic_gbps: 50" or "# nvlink_domain: 72" fill in what the output does not say.
	Text string `json:"text" validate:"required"`
	// Ranks, Nodes and Collective override what Text says.
	Ranks      int    `json:"ranks,omitempty" validate:"omitempty,gte=2,lte=65536" example:"16"`
	Nodes      int    `json:"nodes,omitempty" validate:"omitempty,gte=1,lte=1048576" example:"2"`
	Collective string `json:"collective,omitempty" example:"all_reduce"`
} // @name FitOutput

// FitResponse is the answer of POST /v1/cost-models/fit.
type FitResponse struct {
	// CostModel is the fitted model: pass it as any request's cost_model.
	CostModel json.RawMessage `json:"cost_model" swaggertype:"object"`
	// Points are every measurement priced on the fitted model and on the base.
	Points []FitPoint `json:"points"`
	// Groups summarise the points of at least 1 MiB per collective and scope.
	Groups []FitGroup `json:"groups"`
	// Outliers are the points of at least 1 MiB the fitted model misses by more than 25%.
	Outliers []FitPoint `json:"outliers"`
} // @name FitResponse

// FitPoint is one measurement and its prices.
type FitPoint struct {
	Source     string  `json:"source" example:"all_reduce_2x8.txt:42"`
	Collective string  `json:"collective" example:"all_reduce"`
	Scope      string  `json:"scope" example:"nodes"`
	Ranks      int     `json:"ranks" example:"16"`
	Nodes      int     `json:"nodes" example:"2"`
	Bytes      int64   `json:"bytes" example:"1073741824"`
	MeasuredUS float64 `json:"measured_us" example:"5731.2"`
	// PredictedUS and Error (predicted/measured - 1) are the fitted model's.
	PredictedUS float64 `json:"predicted_us" example:"5600.1"`
	Error       float64 `json:"error" example:"-0.023"`
	// BaseUS and BaseError are the base model's.
	BaseUS    float64 `json:"base_us" example:"8021.7"`
	BaseError float64 `json:"base_error" example:"0.4"`
	// Fitted says whether the fit used the point: 1 MiB or more (at the least time
	// measured at its size or larger in its run: a larger transfer never takes less).
	Fitted bool `json:"fitted"`
} // @name FitPoint

// FitGroup is the error of one collective in one scope, over points of 1 MiB or more.
type FitGroup struct {
	Collective string `json:"collective" example:"all_reduce"`
	Scope      string `json:"scope" example:"nodes"`
	Points     int    `json:"points" example:"12"`
	// GeomeanError is exp(mean |log(predicted/measured)|) - 1; WorstError the largest
	// |predicted/measured - 1|. The Base figures are the base model's.
	GeomeanError     float64 `json:"geomean_error" example:"0.04"`
	WorstError       float64 `json:"worst_error" example:"0.11"`
	BaseGeomeanError float64 `json:"base_geomean_error" example:"0.35"`
	BaseWorstError   float64 `json:"base_worst_error" example:"0.6"`
} // @name FitGroup

// fitCostModel godoc
//
//	@Summary		Fit a cost model to nccl-tests outputs
//	@Description	Reads nccl-tests outputs as printed (all_gather_perf, reduce_scatter_perf, all_reduce_perf, alltoall_perf, sendrecv_perf) and fits the base profile's collectives figures (per algorithm its NVLink and network efficiencies, efficiency-curve half size and base latency; the point-to-point transport's efficiency and overhead) to the measurements of 1 MiB and more. The answer's cost_model is accepted by every route's cost_model; every point is priced on it and on the base, with its error, and the points missed by more than 25% are listed as outliers. A line the parser cannot read is a 400 naming outputs[i].text and the line.
//	@Tags			cost
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			request	body		FitRequest	true	"base profile and nccl-tests outputs"
//	@Success		200		{object}	FitResponse
//	@Failure		400		{object}	Problem	"invalid JSON, an unreadable output (line named), a base that is not a GPU profile"
//	@Failure		413		{object}	Problem	"body too large"
//	@Failure		415		{object}	Problem	"not JSON"
//	@Failure		401		{object}	Problem	"no or a wrong API key (when SHARDPLAN_API_KEYS is set)"
//	@Failure		429		{object}	Problem	"over the per-client rate limit (SHARDPLAN_RATE_LIMIT; Retry-After)"
//	@Failure		503		{object}	Problem	"overloaded or timed out"
//	@Router			/v1/cost-models/fit [post]
func (s *Server) fitCostModel(w http.ResponseWriter, r *http.Request) error {
	var req FitRequest
	if err := s.decodeJSON(r, &req); err != nil {
		return err
	}
	base, err := fitBase(req.Base)
	if err != nil {
		return err
	}
	ms, err := fitMeasurements(req.Outputs)
	if err != nil {
		return err
	}
	fitted, pe, err := cost.FitContext(r.Context(), ms, base)
	if cerr := r.Context().Err(); cerr != nil {
		return cerr
	}
	if err != nil {
		return Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("outputs", "%v", err))
	}
	fitted.Name = req.Name
	if fitted.Name == "" {
		fitted.Name = fitName(base.Name)
	}
	if _, err := cost.New(fitted); err != nil {
		return Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("name", "%v", err))
	}
	basePE, err := cost.Errors(base, ms)
	if err != nil {
		return Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("outputs", "%v", err))
	}
	if err := r.Context().Err(); err != nil {
		return err
	}
	raw, err := json.Marshal(fitted)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fitAnswer(raw, pe, basePE))
}

// fitName is the default name of a model fitted on base.
func fitName(base string) string {
	const suffix = "-fitted"
	if len(base)+len(suffix) > 64 {
		base = base[:64-len(suffix)]
	}
	return base + suffix
}

// fitBase resolves the request's base: a GPU model with collectives figures.
func fitBase(raw json.RawMessage) (cost.ProfileInfo, error) {
	m, err := cost.Resolve(raw, "base")
	if err != nil {
		return cost.ProfileInfo{}, Invalid(slugInvalidRequest, "Invalid request", appendFieldErrors(nil, err)...)
	}
	f, ok := m.(*cost.Fabric)
	if !ok || f.Info().Collectives == nil {
		return cost.ProfileInfo{}, Invalid(slugInvalidRequest, "Invalid request",
			sharding.Fieldf("base", "%q has no collectives figures to fit; start from a GPU profile (h100, h200, b200, gb200-nvl72, a100)", m.Name()))
	}
	return f.Info(), nil
}

// fitMeasurements parses every output into measurements, each error naming its output
// and line.
func fitMeasurements(outs []FitOutput) ([]cost.Measurement, error) {
	var ms []cost.Measurement
	var fes []*sharding.FieldError
	for i, o := range outs {
		field := fmt.Sprintf("outputs[%d].text", i)
		name := o.Name
		if name == "" {
			name = fmt.Sprintf("outputs[%d]", i)
		}
		runs, err := nccltests.ParseAll(strings.NewReader(o.Text))
		if err != nil {
			fes = append(fes, sharding.Fieldf(field, "%v", err))
			continue
		}
		for _, res := range runs {
			more, fe := fitRun(res, o, i, name)
			if fe != nil {
				fes = append(fes, fe)
				break
			}
			ms = append(ms, more...)
		}
		if len(ms) > maxFitPoints {
			return nil, NewProblem(http.StatusBadRequest, slugLimitExceeded, "Limit exceeded",
				"outputs: more than %d measured points; fit fewer runs or sizes at a time", maxFitPoints)
		}
	}
	if len(fes) > 0 {
		return nil, Invalid(slugInvalidRequest, "Invalid request", fes...)
	}
	if len(ms) == 0 {
		return nil, Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("outputs", "no measured point (a row with a positive size and time); give nccl-tests outputs with their tables"))
	}
	return ms, nil
}

// fitRun is the measurements of one run of output i (o), with o's overrides, or the
// error naming the field.
func fitRun(res *nccltests.Result, o FitOutput, i int, name string) ([]cost.Measurement, *sharding.FieldError) {
	field := fmt.Sprintf("outputs[%d].text", i)
	if o.Collective != "" {
		c, ok := nccltests.ParseCollective(o.Collective)
		if !ok {
			return nil, sharding.Fieldf(fmt.Sprintf("outputs[%d].collective", i), "unknown collective %q; use all_gather, reduce_scatter, all_reduce, alltoall or sendrecv", o.Collective)
		}
		res.Collective = c
	}
	if o.Ranks > 0 {
		res.Ranks = o.Ranks
	}
	if o.Nodes > 0 {
		res.Nodes = o.Nodes
	}
	if res.Ranks > maxFitRanks {
		return nil, sharding.Fieldf(fmt.Sprintf("outputs[%d].ranks", i), "%d ranks; a fit takes runs of at most %d ranks", res.Ranks, maxFitRanks)
	}
	if res.Nodes > res.Ranks && res.Ranks > 0 {
		return nil, sharding.Fieldf(fmt.Sprintf("outputs[%d].nodes", i), "%d nodes for %d ranks; a node holds at least one rank", res.Nodes, res.Ranks)
	}
	m, err := cost.MeasurementsOf(res, name)
	if err != nil {
		return nil, sharding.Fieldf(field, "%v", err)
	}
	return m, nil
}

// fitAnswer builds the answer from the fitted and base errors of the same points.
func fitAnswer(model json.RawMessage, pe, basePE []cost.PointError) FitResponse {
	out := FitResponse{CostModel: model, Points: make([]FitPoint, len(pe)), Outliers: []FitPoint{}}
	type key struct{ kind, scope string }
	groups := map[key]*fitAcc{}
	for i, p := range pe {
		fp := FitPoint{Source: p.Source, Collective: string(p.Kind), Scope: string(p.Scope()), Ranks: p.Ranks,
			Nodes: p.Nodes, Bytes: p.Bytes, MeasuredUS: p.TimeUS, PredictedUS: p.PredictedUS, Error: p.Error,
			Fitted: p.Bytes >= cost.FitMinBytes}
		if i < len(basePE) {
			fp.BaseUS, fp.BaseError = basePE[i].PredictedUS, basePE[i].Error
		}
		out.Points[i] = fp
		if p.Bytes < cost.FitMinBytes {
			continue
		}
		if math.Abs(p.Error) > fitOutlier {
			out.Outliers = append(out.Outliers, fp)
		}
		k := key{fp.Collective, fp.Scope}
		if groups[k] == nil {
			groups[k] = &fitAcc{}
		}
		groups[k].add(fp.Error, fp.BaseError)
	}
	for k, a := range groups {
		out.Groups = append(out.Groups, a.group(k.kind, k.scope))
	}
	slices.SortFunc(out.Groups, func(a, b FitGroup) int {
		return strings.Compare(a.Collective+"/"+a.Scope, b.Collective+"/"+b.Scope)
	})
	if out.Groups == nil {
		out.Groups = []FitGroup{}
	}
	return out
}

// fitAcc accumulates one group's errors.
type fitAcc struct {
	n                int
	logSum, baseLog  float64
	worst, baseWorst float64
}

func (a *fitAcc) add(e, be float64) {
	a.n++
	a.logSum += math.Abs(math.Log1p(e))
	a.baseLog += math.Abs(math.Log1p(be))
	a.worst = max(a.worst, math.Abs(e))
	a.baseWorst = max(a.baseWorst, math.Abs(be))
}

func (a *fitAcc) group(kind, scope string) FitGroup {
	n := float64(a.n)
	return FitGroup{Collective: kind, Scope: scope, Points: a.n,
		GeomeanError: math.Expm1(a.logSum / n), WorstError: a.worst,
		BaseGeomeanError: math.Expm1(a.baseLog / n), BaseWorstError: a.baseWorst}
}
