// Package openapi holds shardplan's OpenAPI specs: the 2.0 document swag generates from
// the annotations in cmd/shardplan-server and api, JSON and YAML only (go tool swag init -g
// cmd/shardplan-server/main.go -o openapi --outputTypes json,yaml: no Go code, so the server does
// not link swag), and its OpenAPI 3 conversion (go run ./openapi/gen). Do not edit
// swagger.json, swagger.yaml or openapi3.json by hand; this file is not generated.
package openapi

import _ "embed"

// JSON is swagger.json, served at GET /openapi.json.
//
//go:embed swagger.json
var JSON []byte

// JSON3 is openapi3.json (written by go run ./openapi/gen from swagger.json), served at
// GET /openapi3.json.
//
//go:embed openapi3.json
var JSON3 []byte
