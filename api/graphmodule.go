package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/shardplan/shardplan/internal/propagation"
	"github.com/shardplan/shardplan/internal/sharding"
	"github.com/shardplan/shardplan/internal/stablehlo"
)

// StableHLO modules on POST /v1/graph: a JSON body {"module": "...", "function": "main",
// ...} or the raw text with Content-Type: application/mlir (the other fields as query
// parameters). With Accept: application/mlir the answer is the module annotated the way
// sdy_opt prints a propagated module.

// OpaqueOpJSON is an op of a module that the import does not model: nothing propagates
// through it.
type OpaqueOpJSON struct {
	Op      string   `json:"op" example:"stablehlo.sort"`
	Results []string `json:"results"`
	Line    int      `json:"line" example:"12"`
	Column  int      `json:"column" example:"5"`
} // @name OpaqueOp

func opaqueOpsJSON(ops []stablehlo.OpaqueOp) []OpaqueOpJSON {
	out := make([]OpaqueOpJSON, len(ops))
	for i, o := range ops {
		out[i] = OpaqueOpJSON{Op: o.Op, Results: o.Results, Line: o.Line, Column: o.Column}
	}
	return out
}

// importModule reads in.req.Module into in's mesh, graph and options, or returns ctx's
// error once ctx is done.
func (s *Server) importModule(ctx context.Context, in *graphInput) error {
	var reqMesh *sharding.Mesh
	if raw := bytes.TrimSpace(in.req.Mesh); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		m, err := parseMesh(in.req.Mesh, "mesh", s.limits)
		if err != nil {
			return err
		}
		reqMesh = m
	}
	if looksLikeHLO(in.req.Module) {
		return sharding.Fieldf("module", "line 1, column 1: this is a compiled HLO module (HloModule ...), not StableHLO: post it to /v1/audit as \"hlo_module\" or with Content-Type %s", hloMediaType)
	}
	imp, err := stablehlo.Read(ctx, in.req.Module, stablehlo.Options{Function: in.req.Function, Mesh: reqMesh, Limits: stablehlo.Limits{
		MaxDepth: s.limits.MaxModuleDepth, MaxOps: s.limits.MaxGraphOps, MaxTensors: s.limits.MaxGraphTensors,
		MaxDevices: s.limits.MaxDevices, MaxMeshAxes: s.limits.MaxMeshAxes,
	}})
	if err != nil {
		return err
	}
	opts, err := in.req.moduleOptions()
	if err != nil {
		return err
	}
	in.mesh, in.graph, in.opts, in.imp = imp.Mesh, imp.Graph, opts, imp
	return nil
}

// locate makes the errors of propagating or planning an imported module name its line
// and column.
func (in *graphInput) locate(err error) error {
	if in.imp == nil || err == nil {
		return err
	}
	return in.imp.Locate(err)
}

// moduleQuery lists the query parameters of a raw MLIR body, each the JSON field of
// the same name.
var moduleQuery = []string{"function", "mesh", "strategy", "cost_model", "conflict_resolution", "op_priority", "include"}

// moduleRequest reads a raw MLIR body (Content-Type: application/mlir) and its query
// parameters into the GraphRequest the equivalent JSON body gives. A JSON body gives a
// nil request.
func moduleRequest(r *http.Request, body []byte) (*GraphRequest, error) {
	if !isMLIR(r) {
		return nil, nil
	}
	return moduleRequestOf(r.URL.Query(), body)
}

// moduleRequestOf is the GraphRequest of a raw MLIR body and the query parameters q,
// taking the module text as it is (one copy of the body, never escaped into JSON and
// decoded again).
func moduleRequestOf(q url.Values, body []byte) (req *GraphRequest, err error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, Invalid(slugInvalidModule, "Invalid module", sharding.Fieldf("module", "the request body is empty; send the module's MLIR text"))
	}
	if err := checkQuery(q, moduleQuery, "a module body"); err != nil {
		return nil, err
	}
	req = &GraphRequest{Module: string(body), Function: q.Get("function"), Strategy: q.Get("strategy")}
	for _, f := range []struct {
		name string
		dst  *json.RawMessage
	}{{"mesh", &req.Mesh}, {"cost_model", &req.CostModel}} {
		*f.dst = queryJSON(q, f.name)
	}
	opts := &GraphOptions{}
	if v := q.Get("conflict_resolution"); v != "" {
		opts.ConflictResolution = &v
	}
	switch v := q.Get("op_priority"); v {
	case "":
	case "true", "false":
		b := v == "true"
		opts.OpPriority = &b
	default:
		return nil, Invalid(slugInvalidRequest, "Invalid request", sharding.Fieldf("op_priority", "must be true or false (got %q)", v))
	}
	if *opts != (GraphOptions{}) {
		req.Options = opts
	}
	if v := q.Get("include"); v != "" {
		req.Include = strings.Split(v, ",")
	}
	return req, nil
}

// queryJSON is query parameter name as the JSON string of a raw field, nil when absent.
func queryJSON(q url.Values, name string) json.RawMessage {
	v := q.Get(name)
	if v == "" {
		return nil
	}
	b, _ := json.Marshal(v) // a string always encodes
	return b
}

// graphMLIR answers a module request with the module annotated as sdy_opt prints a
// propagated one (propagation only: the collectives are in the JSON answer).
func (s *Server) graphMLIR(ctx context.Context, in *graphInput) (*answer, error) {
	if in.imp == nil {
		return nil, NewProblem(http.StatusNotAcceptable, slugNotAcceptable, "Not acceptable",
			"an application/mlir answer needs a module request (\"module\" or an application/mlir body); ask a JSON op list for application/json")
	}
	res, err := propagation.Propagate(ctx, in.graph, in.mesh, in.opts)
	if err != nil {
		return nil, in.locate(err)
	}
	return &answer{body: []byte(in.imp.Annotate(res.Shardings))}, nil
}

// looksLikeHLO reports whether text starts as a compiled HLO module.
func looksLikeHLO(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "HloModule ")
}
