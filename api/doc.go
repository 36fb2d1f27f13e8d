// Package api is shardplan's HTTP transport: the chi router and its middleware, request
// and response types, decoding and validation, and the one problem+json renderer every
// failure goes through. It translates JSON to the domain packages and back; it holds no
// planning logic.
//
// Each route has its own file, which reads the request once into a typed request, calls
// the domain packages and encodes the answer:
//
//	GET  /healthz, /readyz, /openapi*.json  health.go
//	GET  /docs, /explore                    pages.go (the pages themselves: package ui)
//	GET  /v1/cost-models[/{name}]           costmodels.go
//	POST /v1/tiles                          tiles.go
//	POST /v1/reshard                        reshard.go
//	GET  /v1/plans/{plan_id}                plans.go
//	POST /v1/transfer                       transfer.go
//	POST /v1/graph                          graph.go; its request graphwire.go (types and
//	                                        reader), graphdomain.go (to propagation's
//	                                        graph, and its plan id)
//	POST /v1/audit                          audit.go (a program is read as POST /v1/graph
//	                                        reads it: graphwire.go, graphdomain.go)
//
// What the routes share:
//
//   - server.go: Server, its limits and dependencies, and the route table;
//   - middleware (request ids, metrics, recovery, deadlines, body limits): middleware.go,
//     admission.go (body buffering, slots, rate limits), access.go (API keys, CORS),
//     accept.go (content negotiation), answerlimit.go and budget.go (answer sizes),
//     problem.go (problem+json);
//   - decoding: decode.go (strict JSON into a typed request, validation), dupkeys.go,
//     jsondepth.go, wirereader.go; request.go (meshes, shapes, dtypes and the options
//     reshard and graph requests share);
//   - memoization: memo.go (the exact-request and plan memos), memometrics.go;
//   - the wire form of plans: shardingjson.go, steps.go, policy.go, and their hand-written
//     encoders planjson.go and jsonappender.go; wire.go, the wire forms of the domain's
//     values an answer carries and their converters;
//   - rendering: svg.go and transfersvg.go (image/svg+xml), audittext.go and
//     transfertext.go (text/plain), words.go.
package api
