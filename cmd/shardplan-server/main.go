// Command shardplan-server runs the shardplan HTTP/JSON service.
//
//	@title						shardplan API
//	@version					0.1.0
//	@description				shardplan plans how tensors are laid out on a device mesh and how data moves between layouts: per-device tiles, reshard schedules and sharding propagation. Errors are RFC 9457 application/problem+json. Sizes are bytes, times microseconds.
//	@contact.name				shardplan maintainers
//	@contact.url				https://shardplan.dev
//	@license.name				Apache-2.0
//	@BasePath					/
//	@schemes					http https
//	@accept						json
//	@produce					json
//	@externalDocs.description	HTTP/JSON contract (API.md)
//	@externalDocs.url			https://shardplan.dev/docs/api
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "shardplan:", err)
		os.Exit(1)
	}
}
