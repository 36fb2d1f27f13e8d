package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/shardplan/shardplan/internal/sharding"
)

// TilesRequest is the body of POST /v1/tiles.
type TilesRequest struct {
	// Mesh is a mesh object, the string "x=2,y=4", or a mesh as JAX, Shardy or torch print it.
	Mesh json.RawMessage `json:"mesh" validate:"required" swaggertype:"object"`
	// Shape is the global tensor shape; every dim >= 1 (or give tensor instead).
	Shape []int64 `json:"shape,omitempty" validate:"required_without=Tensor,dive,gte=1" example:"16,23"`
	// DType is the element type (or give element_bytes instead): an XLA name (pred, s8,
	// u8, s16, u16, f16, bf16, s32, u32, f32, s64, u64, f64, c64, c128, f8e4m3fn, f8e5m2,
	// s4, u4) or its NumPy/JAX/PyTorch spelling (float32, bfloat16, int8, bool,
	// jnp.float32, torch.float16, ...).
	DType string `json:"dtype,omitempty" example:"f32"`
	// ElementBytes is the element size in bytes, instead of dtype.
	ElementBytes *int `json:"element_bytes,omitempty" validate:"omitempty,gte=1,lte=64" minimum:"1" maximum:"64"`
	// Tensor is the shape and dtype in one, as MLIR or XLA print a tensor type
	// ("tensor<2048x2048xf32>", "f32[2048,2048]"), instead of shape and dtype.
	Tensor string `json:"tensor,omitempty" example:"tensor<2048x2048xf32>"`
	// Sharding in any input form: object, Shardy text, PartitionSpec-like array (e.g.
	// [[0],[1]] or ["x", null]; fewer entries than the rank leave the rest replicated),
	// JAX PartitionSpec text ("P('x', None)") or jax.Array.sharding's repr
	// ("NamedSharding(mesh=..., spec=PartitionSpec(...))"), XLA HloSharding text
	// ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), or DTensor placements
	// ({"placements": ["Shard(0)", "Replicate()", "Partial()"]}, one per mesh dim).
	Sharding json.RawMessage `json:"sharding" validate:"required" swaggertype:"object"`
	// Locate lists global indices to find the owners of (one entry per tensor dim each).
	Locate [][]int64 `json:"locate,omitempty" validate:"omitempty,max=1024"`
	// Devices restricts the device list to these ids (default: every device, unless the
	// mesh has more than the list limit).
	Devices []int `json:"devices,omitempty" validate:"omitempty,max=65536"`
} // @name TilesRequest

// TilesResponse is the body of a POST /v1/tiles answer.
type TilesResponse struct {
	// Mesh is the request's mesh in object form.
	Mesh MeshObject `json:"mesh"`
	// Sharding is the canonical form of the request's sharding.
	Sharding ShardingJSON `json:"sharding"`
	// TileShape is the padded local buffer shape: ceildiv(D, shards) per dim.
	TileShape []int64 `json:"tile_shape" example:"6,6"`
	// TileBytes is the size of one padded local buffer in bytes.
	TileBytes int64 `json:"tile_bytes" example:"144"`
	// Maps are the symbolic device<->global index maps.
	Maps Maps `json:"maps"`
	// Devices are the tiles of the asked devices (all devices by default).
	Devices []DeviceTile `json:"devices,omitempty"`
	// DevicesOmitted is true when the mesh has more devices than the list limit and no
	// devices were asked for; Note says how to ask.
	DevicesOmitted bool   `json:"devices_omitted,omitempty"`
	Note           string `json:"note,omitempty"`
	// Locate has one entry per asked index, with every device holding it.
	Locate []Located `json:"locate,omitempty"`
} // @name TilesResponse

// Maps are the symbolic maps of the mesh notes.
type Maps struct {
	DeviceToGlobal string `json:"device_to_global" example:"d(x, y)[a, b] -> t[x * 6 + a, y * 6 + b]"`
	GlobalToDevice string `json:"global_to_device" example:"t[i, j] -> d(i floordiv 6, j floordiv 6)[i mod 6, j mod 6]"`
} // @name Maps

// Located is one located global index and its owners.
type Located struct {
	Index  []int64 `json:"index" example:"13,17"`
	Owners []Owner `json:"owners"`
} // @name Located

// tiles godoc
//
//	@Summary		Per-device tiles of a sharded tensor
//	@Description	Lays a tensor of `shape` out on `mesh` by `sharding` (any input form) and answers each device's tile (coords, global [start, end) per dim, padded local shape, padding), the padded tile shape and bytes, the symbolic ceildiv/floordiv maps, and for each `locate` index every device holding it with its local index. Above the device-list limit, `devices` is left out unless `devices` ids are asked for.
//	@Tags			tiles
//	@Accept			json
//	@Produce		json
//	@Produce		image/svg+xml
//	@Produce		application/problem+json
//	@Param			request	body		TilesRequest	true	"tensor, mesh and sharding"
//	@Success		200		{object}	TilesResponse
//	@Failure		400		{object}	Problem	"invalid JSON, field, sharding, or a limit exceeded"
//	@Failure		413		{object}	Problem	"body too large"
//	@Failure		408		{object}	Problem	"the body did not arrive within SHARDPLAN_BODY_READ_TIMEOUT"
//	@Failure		415		{object}	Problem	"not JSON"
//	@Failure		401		{object}	Problem	"no or a wrong API key (when SHARDPLAN_API_KEYS is set)"
//	@Failure		429		{object}	Problem	"over the per-client rate limit (SHARDPLAN_RATE_LIMIT; Retry-After)"
//	@Failure		503		{object}	Problem	"overloaded or timed out"
//	@Router			/v1/tiles [post]
func (s *Server) tiles(w http.ResponseWriter, r *http.Request) error {
	var req TilesRequest
	if err := s.decodeJSON(r, &req); err != nil {
		return err
	}
	m, err := parseMesh(req.Mesh, "mesh", s.limits)
	if err != nil {
		return err
	}
	if err := tensorType(req.Tensor, &req.Shape, &req.DType, req.ElementBytes); err != nil {
		return err
	}
	if err := checkShape(req.Shape, "shape", s.limits); err != nil {
		return err
	}
	elemBits, err := elementBits(req.DType, req.ElementBytes, "dtype")
	if err != nil {
		return err
	}
	sh, err := sharding.Parse(req.Sharding, m, req.Shape, "sharding")
	if err != nil {
		return err
	}
	n := m.NumDevices()
	var fes sharding.Errors
	for i, id := range req.Devices {
		if id < 0 || id >= n {
			fes = append(fes, sharding.Fieldf(fmt.Sprintf("devices[%d]", i), "device id %d is outside the mesh's ids 0..%d", id, n-1))
		}
	}
	for i, idx := range req.Locate {
		f := fmt.Sprintf("locate[%d]", i)
		if len(idx) != len(req.Shape) {
			fes = append(fes, sharding.Fieldf(f, "has %d coordinates but the tensor has rank %d", len(idx), len(req.Shape)))
			continue
		}
		for d, v := range idx {
			if v < 0 || v >= req.Shape[d] {
				fes = append(fes, sharding.Fieldf(fmt.Sprintf("%s[%d]", f, d), "index %d is outside dim %d of size %d (valid: 0..%d)", v, d, req.Shape[d], req.Shape[d]-1))
			}
		}
	}
	if len(fes) > 0 {
		return Invalid(slugInvalidRequest, "Invalid request", fes...)
	}

	layout := sharding.NewLayout(m, req.Shape, sh)
	if len(req.Locate) > 0 {
		shards := int64(1)
		for _, c := range layout.Counts {
			shards *= int64(c)
		}
		owners := int64(len(req.Locate)) * (int64(n) / shards)
		if limit := int64(max(s.limits.MaxDevices, s.limits.ListDeviceLimit)); owners > limit {
			return limitExceeded("locate", "would list %d owners (%d indices x %d devices each); the limit is %d (SHARDPLAN_MAX_DEVICES); ask for fewer indices",
				owners, len(req.Locate), int64(n)/shards, limit)
		}
	}

	d2g, g2d := layout.Maps()
	resp := TilesResponse{
		Mesh:      meshJSON(m),
		Sharding:  shardingJSON(sh, m),
		TileShape: layout.Tile,
		TileBytes: sharding.BufferBytes(layout.TileElements(), elemBits),
		Maps:      Maps{DeviceToGlobal: d2g, GlobalToDevice: g2d},
	}
	ids := req.Devices
	switch {
	case ids != nil:
	case s.limits.ListDeviceLimit > 0 && n > s.limits.ListDeviceLimit:
		resp.DevicesOmitted = true
		resp.Note = fmt.Sprintf("the mesh has %d devices, more than the list limit of %d (SHARDPLAN_LIST_DEVICE_LIMIT); ask for the ones you need with \"devices\": [ids]", n, s.limits.ListDeviceLimit)
	default:
		ids = make([]int, n)
		for i := range ids {
			ids[i] = i
		}
	}
	if ids != nil {
		resp.Devices = make([]DeviceTile, len(ids))
		ctx := r.Context()
		for i, id := range ids {
			if i%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			resp.Devices[i] = DeviceTile(layout.TileOf(id))
		}
	}
	for _, idx := range req.Locate {
		// Each index walks its mesh axes' coordinates: 65,536 steps on a large prime axis.
		if err := r.Context().Err(); err != nil {
			return err
		}
		resp.Locate = append(resp.Locate, Located{Index: idx, Owners: ownersOf(layout.Locate(idx))})
	}
	if err := r.Context().Err(); err != nil {
		return err
	}
	if wantsSVG(r) {
		if resp.Devices == nil {
			return limitExceeded("mesh", "has %d devices, more than the list limit of %d (SHARDPLAN_LIST_DEVICE_LIMIT); an SVG draws the tiles of the devices listed: ask for them with \"devices\": [ids]", n, s.limits.ListDeviceLimit)
		}
		body, err := tilesSVG(m, req.Shape, &resp)
		if err != nil {
			return err
		}
		writeSVG(w, body)
		return nil
	}
	return writeJSON(w, http.StatusOK, resp)
}
