package stablehlo

import (
	"strconv"
	"strings"

	"github.com/shardplan/shardplan/internal/sharding"
)

// parseHLOMinimal reads the mhlo.sharding strings JAX's GSPMD lowering prints for
// simple layouts: {replicated}, and {devices=[a,b,...]<=[N]} or an explicit device list
// in the mesh's own order, optionally with last_tile_dim_replicate, where each tile dim
// is a product of consecutive mesh axes (major to minor). Anything else is an error
// naming what cannot be expressed. It is replaced by a complete reader when one exists.
func parseHLOMinimal(text string, m *sharding.Mesh, shape []int64, field string) (sharding.Sharding, error) {
	fail := func(format string, args ...any) (sharding.Sharding, error) {
		return sharding.Sharding{}, sharding.Fieldf(field, format, args...)
	}
	s := strings.TrimSpace(text)
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return fail("an HLO sharding is written {replicated} or {devices=[...]...}, got %q", text)
	}
	body := strings.TrimSpace(s[1 : len(s)-1])
	if body == "replicated" {
		return sharding.Replicated(len(shape)), nil
	}
	rest, ok := strings.CutPrefix(body, "devices=[")
	if !ok {
		return fail("HLO sharding %q is not supported here (only {replicated} and {devices=[...]...})", text)
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return fail("HLO sharding %q: unclosed tile shape", text)
	}
	var tiles []int
	for _, f := range strings.Split(rest[:end], ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fail("HLO sharding %q: tile dim %q is not a positive integer", text, f)
		}
		tiles = append(tiles, n)
	}
	rest = strings.TrimSpace(rest[end+1:])
	repl := false
	if r, ok := strings.CutSuffix(rest, "last_tile_dim_replicate"); ok {
		repl, rest = true, strings.TrimSpace(r)
	}
	total := 1
	for _, t := range tiles {
		total *= t
		if total > sharding.MaxMeshDevices {
			return fail("HLO sharding %q has too many tiles", text)
		}
	}
	if total != m.NumDevices() {
		return fail("HLO sharding %q tiles %d devices but the mesh has %d", text, total, m.NumDevices())
	}
	if iota, ok := strings.CutPrefix(rest, "<=["); ok {
		if strings.TrimSpace(strings.TrimSuffix(iota, "]")) != strconv.Itoa(total) {
			return fail("HLO sharding %q: only the plain iota <=[%d] is supported here", text, total)
		}
		if m.DeviceIDs != nil {
			for p := range total {
				if m.DeviceAt(p) != p {
					return fail("HLO sharding %q: the mesh's device order is not the iota order", text)
				}
			}
		}
	} else {
		ids := strings.Split(rest, ",")
		if len(ids) != total {
			return fail("HLO sharding %q lists %d devices, expected %d", text, len(ids), total)
		}
		for p, f := range ids {
			id, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || id != m.DeviceAt(p) {
				return fail("HLO sharding %q: the device list is not in the mesh's order (only that case is supported here)", text)
			}
		}
	}
	rank := len(tiles)
	if repl {
		rank--
	}
	if rank != len(shape) {
		return fail("HLO sharding %q has %d tile dims but the tensor has rank %d", text, rank, len(shape))
	}
	out := sharding.Replicated(len(shape))
	ax := 0
	for d := range rank {
		prod := 1
		for prod < tiles[d] && ax < len(m.Axes) {
			out.Dims[d].Axes = append(out.Dims[d].Axes, sharding.FullAxis(m.Axes[ax]))
			prod *= m.Axes[ax].Size
			ax++
		}
		if prod != tiles[d] {
			return fail("HLO sharding %q: tile dim %d (%d) is not a product of consecutive mesh axes of %s", text, d, tiles[d], m.String())
		}
	}
	return out, nil
}
