"""Converters from JAX and PyTorch sharding objects to the shardplan API's JSON values.

Everything here is duck-typed: neither JAX nor PyTorch is imported, so the module works
(and is testable) without them. The API values are described in docs/API.md:

* mesh: ``{"name": "mesh", "axes": [{"name": "x", "size": 2}, ...], "device_ids": [...]}``,
  axes major to minor, ``device_ids[position]`` the id of the device at that row-major
  position of the mesh;
* sharding, array form (a PartitionSpec): ``["x", None, ["y", "z"]]``;
* sharding, object form: ``{"dims": [{"axes": ["x"]}, {"axes": [], "open": True}],
  "unreduced": ["u"]}``.
"""

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = [
    "mesh_from_jax",
    "spec_from_partition_spec",
    "from_named_sharding",
    "mesh_from_device_mesh",
    "sharding_from_placements",
    "from_dtensor",
    "to_partition_spec_string",
    "dtype_name",
    "placements_json",
    "partition_spec_entries",
    "to_partition_spec",
    "to_named_sharding",
    "to_placement_strings",
    "to_placements",
]

Mesh = Dict[str, Any]
Sharding = Union[List[Any], Dict[str, Any]]


# -- helpers ----------------------------------------------------------------------


def _class_names(obj: Any) -> List[str]:
    return [c.__name__ for c in type(obj).__mro__]


def _flatten(x: Any) -> List[Any]:
    """Row-major flattening of a numpy array, a torch tensor or nested sequences."""
    flat = getattr(x, "flat", None)
    if flat is not None and not callable(flat):
        return list(flat)
    if hasattr(x, "flatten") and hasattr(x, "tolist"):
        return list(x.flatten().tolist())
    if hasattr(x, "tolist"):
        x = x.tolist()
    out: List[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, (list, tuple)):
            for e in v:
                walk(e)
        else:
            out.append(v)

    walk(x)
    return out


def _device_id(d: Any) -> int:
    if hasattr(d, "id"):
        return int(d.id)
    if hasattr(d, "item"):  # a 0-d tensor / numpy scalar
        return int(d.item())
    return int(d)


def _check_ids(ids: List[int], n: int, what: str) -> None:
    if len(ids) != n:
        raise ValueError("%s: %d device ids for a mesh of %d devices" % (what, len(ids), n))
    if sorted(ids) != list(range(n)):
        raise ValueError(
            "%s: device ids %s are not a permutation of 0..%d, which the API requires; "
            "pass include_device_ids=False to use the default order, or renumber them"
            % (what, ids if n <= 16 else str(ids[:16])[:-1] + ", ...]", n - 1)
        )


def _mesh(name: str, names: Sequence[str], sizes: Sequence[int], ids: Optional[List[int]]) -> Mesh:
    if len(names) != len(sizes):
        raise ValueError("mesh has %d axis names but %d sizes" % (len(names), len(sizes)))
    out: Mesh = {"name": name, "axes": [{"name": str(a), "size": int(s)} for a, s in zip(names, sizes)]}
    if ids is not None:
        out["device_ids"] = ids
    return out


def _prod(xs: Iterable[int]) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


# -- JAX ----------------------------------------------------------------------------


def mesh_from_jax(mesh: Any, name: str = "mesh", include_device_ids: bool = True) -> Mesh:
    """The API mesh of a ``jax.sharding.Mesh`` (or ``AbstractMesh``).

    Uses ``mesh.axis_names`` and ``mesh.devices.shape`` (or, without devices, the
    ``mesh.shape`` mapping name -> size, or ``mesh.axis_sizes``). Device ids come from the
    ``.id`` of the items of ``mesh.devices.flat`` (row-major, as the API wants) and must be
    a permutation of 0..N-1; pass ``include_device_ids=False`` to leave them out (the
    service then numbers devices 0..N-1 in mesh order).
    """
    names = [str(a) for a in mesh.axis_names]
    devices = getattr(mesh, "devices", None)
    ids: Optional[List[int]] = None
    if devices is not None and hasattr(devices, "shape"):
        sizes = [int(s) for s in devices.shape]
        if include_device_ids:
            ids = [_device_id(d) for d in _flatten(devices)]
            _check_ids(ids, _prod(sizes), "mesh_from_jax")
    else:
        shape = getattr(mesh, "shape", None)
        if hasattr(shape, "keys"):
            sizes = [int(shape[a]) for a in mesh.axis_names]
        elif getattr(mesh, "axis_sizes", None) is not None:
            sizes = [int(s) for s in mesh.axis_sizes]
        elif shape is not None:
            sizes = [int(s) for s in shape]
        else:
            raise ValueError("mesh_from_jax: mesh has neither devices, shape nor axis_sizes")
    return _mesh(name, names, sizes, ids)


def _is_unconstrained(entry: Any, pspec: Any) -> bool:
    sentinel = getattr(type(pspec), "UNCONSTRAINED", None)
    if sentinel is not None and entry is sentinel:
        return True
    cls = type(entry).__name__.lower()
    return "unconstrained" in cls or (not isinstance(entry, str) and repr(entry) == "UNCONSTRAINED")


def spec_from_partition_spec(pspec: Any, rank: int) -> Sharding:
    """The API sharding of a JAX ``PartitionSpec`` for a tensor of ``rank`` dims.

    Each entry is ``None`` (not sharded), an axis name, or a tuple of axis names (major to
    minor); the spec is padded with ``None`` up to ``rank``. The result is the array form
    ``["x", None, ["y", "z"]]``, except when the spec has ``P.UNCONSTRAINED`` entries or
    ``unreduced`` axes, which the array form cannot express: then it is the object form,
    an unconstrained entry becoming an open dim ``{"axes": [], "open": True}``.
    """
    entries = list(pspec) if pspec is not None else []
    if len(entries) > rank:
        raise ValueError("PartitionSpec %r has %d entries for a rank-%d tensor" % (pspec, len(entries), rank))
    entries += [None] * (rank - len(entries))
    out: List[Any] = []
    open_dims: List[int] = []
    for d, e in enumerate(entries):
        if e is None:
            out.append(None)
        elif isinstance(e, str):
            out.append(e)
        elif _is_unconstrained(e, pspec):
            out.append(None)
            open_dims.append(d)
        elif isinstance(e, (tuple, list)):
            axes = []
            for a in e:
                if not isinstance(a, str):
                    raise ValueError("PartitionSpec %r: dim %d: axis %r is not a name" % (pspec, d, a))
                axes.append(a)
            out.append(axes if len(axes) != 1 else axes[0])
            if not axes:
                out[-1] = None
        else:
            raise ValueError("PartitionSpec %r: dim %d: unsupported entry %r" % (pspec, d, e))
    unreduced = sorted(str(a) for a in (getattr(pspec, "unreduced", None) or ()))
    if not open_dims and not unreduced:
        return out
    dims: List[Dict[str, Any]] = []
    for d, e in enumerate(out):
        axes = [] if e is None else [e] if isinstance(e, str) else list(e)
        dim: Dict[str, Any] = {"axes": axes}
        if d in open_dims:
            dim["open"] = True
        dims.append(dim)
    obj: Dict[str, Any] = {"dims": dims}
    if unreduced:
        obj["unreduced"] = unreduced
    return obj


def from_named_sharding(ns: Any, rank: int, name: str = "mesh", include_device_ids: bool = True) -> Tuple[Mesh, Sharding]:
    """``(mesh, sharding)`` of a ``jax.sharding.NamedSharding`` (``ns.mesh``, ``ns.spec``)."""
    return mesh_from_jax(ns.mesh, name=name, include_device_ids=include_device_ids), spec_from_partition_spec(ns.spec, rank)


# -- PyTorch DTensor -------------------------------------------------------------------


def _dm_names(dm: Any, n: int) -> List[str]:
    names = getattr(dm, "mesh_dim_names", None)
    if names is None:
        return ["dim_%d" % i for i in range(n)]
    return [str(a) for a in names]


def mesh_from_device_mesh(dm: Any, name: str = "mesh", include_device_ids: bool = True) -> Mesh:
    """The API mesh of a ``torch.distributed.device_mesh.DeviceMesh``.

    Axis names are ``dm.mesh_dim_names`` (``dim_0``, ``dim_1``, ... when it has none), sizes
    ``dm.mesh.shape`` (or ``dm.shape``), device ids the ranks of the flattened ``dm.mesh``
    (row-major). A sub-mesh whose ranks are not 0..N-1 needs ``include_device_ids=False``.
    """
    t = getattr(dm, "mesh", None)
    shape = getattr(t, "shape", None) if t is not None else None
    if shape is None:
        shape = dm.shape
    sizes = [int(s) for s in shape]
    ids: Optional[List[int]] = None
    if include_device_ids and t is not None:
        ids = [_device_id(r) for r in _flatten(t)]
        _check_ids(ids, _prod(sizes), "mesh_from_device_mesh")
    return _mesh(name, _dm_names(dm, len(sizes)), sizes, ids)


def sharding_from_placements(placements: Sequence[Any], mesh_dim_names: Sequence[str], rank: int) -> Dict[str, Any]:
    """The API sharding (object form) of DTensor placements on a tensor of ``rank`` dims.

    ``placements[i]`` is the placement on mesh dim ``i`` (named ``mesh_dim_names[i]``):
    ``Shard(dim)`` shards tensor dim ``dim`` over that mesh axis, ``Replicate()`` does not use
    it, ``Partial()`` makes it an ``unreduced`` axis (the tensor holds partial values over it;
    the schedule and its cost do not depend on the reduce op). ``_StridedShard`` is rejected
    (:func:`placements_json` passes it to the service, which orders it as DTensor does).

    When several mesh dims shard the same tensor dim, their axes are listed major to minor
    in mesh dim order. That is DTensor's default ordering: placements are applied left to
    right, each ``Shard`` splitting the chunks of the previous ones, so the lowest mesh dim
    is the most major.
    """
    names = [str(a) for a in mesh_dim_names]
    if len(placements) != len(names):
        raise ValueError("%d placements for a mesh of %d dims (%s)" % (len(placements), len(names), ", ".join(names)))
    dims: List[List[str]] = [[] for _ in range(rank)]
    unreduced: List[str] = []
    for i, p in enumerate(placements):
        kinds = _class_names(p)
        if "_StridedShard" in kinds or "StridedShard" in kinds:
            raise ValueError(
                "placement %d (%r) is a _StridedShard (FSDP/TP interleaving), which has no "
                "equivalent sharding in the API; redistribute it to Shard first" % (i, p)
            )
        if "Shard" in kinds:
            d = int(p.dim)
            if d < 0:
                d += rank
            if not 0 <= d < rank:
                raise ValueError("placement %d (%r): tensor dim %d out of range for rank %d" % (i, p, int(p.dim), rank))
            dims[d].append(names[i])
        elif "Replicate" in kinds:
            continue
        elif "Partial" in kinds or "_Partial" in kinds:
            unreduced.append(names[i])
        else:
            raise ValueError("placement %d: unsupported placement %r" % (i, p))
    return {"dims": [{"axes": a} for a in dims], "unreduced": unreduced}


def _placement_string(p: Any) -> str:
    kinds = _class_names(p)
    if "_StridedShard" in kinds or "StridedShard" in kinds:
        return "_StridedShard(%d, split_factor=%d)" % (int(p.dim), int(p.split_factor))
    if "Shard" in kinds:
        return "Shard(%d)" % int(p.dim)
    if "Replicate" in kinds:
        return "Replicate()"
    if "Partial" in kinds or "_Partial" in kinds:
        op = getattr(p, "reduce_op", "sum")
        return "Partial(%s)" % str(getattr(op, "name", op)).lower()
    if isinstance(p, str):
        return p
    raise ValueError("unsupported placement %r" % (p,))


def placements_json(placements: Sequence[Any]) -> Dict[str, Any]:
    """The API's DTensor form ``{"placements": ["Shard(0)", "Replicate()", "Partial(sum)"]}``
    of DTensor placement objects (or strings), one per mesh dim. Unlike
    :func:`sharding_from_placements` it needs no rank and passes ``_StridedShard`` through
    (the service orders it as DTensor does); the service rejects non-sum ``Partial``."""
    return {"placements": [_placement_string(p) for p in placements]}


def from_dtensor(t: Any, name: str = "mesh", include_device_ids: bool = True) -> Tuple[Mesh, Dict[str, Any]]:
    """``(mesh, sharding)`` of a DTensor (``t.device_mesh``, ``t.placements``, ``t.ndim``)."""
    dm = t.device_mesh
    mesh = mesh_from_device_mesh(dm, name=name, include_device_ids=include_device_ids)
    rank = int(t.ndim) if hasattr(t, "ndim") else len(t.shape)
    return mesh, sharding_from_placements(t.placements, [a["name"] for a in mesh["axes"]], rank)


# -- output ----------------------------------------------------------------------------


def _axes_of(entry: Any) -> List[str]:
    if entry is None:
        return []
    if isinstance(entry, dict):
        return [str(a) for a in entry.get("axes") or []]
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, (list, tuple)):
        return [str(a) for a in entry]
    raise ValueError("cannot print sharding entry %r (mesh axis indices need the mesh)" % (entry,))


def to_partition_spec_string(sharding: Sharding) -> str:
    """A sharding (object form as returned by the service, or the array form) as a JAX
    ``P(...)`` string, printed like the service's ``suggested_constraints[].partition_spec``:
    ``P('D', ('X','Y'), None)``, with ``unreduced={'u'}`` when there are unreduced axes.

    Open dims, priorities and explicitly replicated axes have no PartitionSpec spelling
    and are left out, as the service does. Sub-axes (``"x:(1)2"``) cannot be named by a
    PartitionSpec: ValueError (use the sharding's ``text`` instead).
    """
    if isinstance(sharding, dict):
        entries = list(sharding.get("dims") or [])
        unreduced = [str(a) for a in sharding.get("unreduced") or []]
    else:
        entries, unreduced = list(sharding), []

    def q(a: str) -> str:
        if ":" in a:
            raise ValueError("sub-axis %r cannot be written in a PartitionSpec" % a)
        return "'" + a + "'"

    parts = []
    for e in entries:
        axes = _axes_of(e)
        if not axes:
            parts.append("None")
        elif len(axes) == 1:
            parts.append(q(axes[0]))
        else:
            parts.append("(" + ",".join(q(a) for a in axes) + ")")
    if unreduced:
        parts.append("unreduced={" + ",".join(q(a) for a in unreduced) + "}")
    return "P(" + ", ".join(parts) + ")"


_DTYPES = {
    "bool": "pred", "int8": "s8", "uint8": "u8", "int16": "s16", "uint16": "u16",
    "float16": "f16", "half": "f16", "bfloat16": "bf16", "int32": "s32", "int": "s32",
    "uint32": "u32", "float32": "f32", "float": "f32", "int64": "s64", "long": "s64",
    "uint64": "u64", "float64": "f64", "double": "f64", "complex64": "c64",
    "cfloat": "c64", "complex128": "c128", "cdouble": "c128",
    "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "int4": "s4", "uint4": "u4",
}


def dtype_name(dtype: Any) -> str:
    """The API dtype name of a JAX/numpy or torch dtype (``jnp.bfloat16``, ``torch.float32``,
    ``"float32"``...): ``"bf16"``, ``"f32"``... Raises ValueError for an unknown dtype."""
    s = str(getattr(dtype, "name", None) or dtype)
    if s.startswith("<class '"):  # a numpy scalar type such as numpy.float32
        s = s[len("<class '"):-2].rsplit(".", 1)[-1]
    s = s.rsplit(".", 1)[-1]  # "torch.float32" -> "float32"
    if s in _DTYPES.values():
        return s
    if s in _DTYPES:
        return _DTYPES[s]
    raise ValueError("unknown dtype %r" % (dtype,))


# -- back to the frameworks -----------------------------------------------------------


def _dims_of(sharding: Sharding) -> Tuple[List[List[str]], List[str]]:
    """Per tensor dim, its axes major to minor, and the unreduced axes, of a returned
    sharding (object form) or the array form."""
    if isinstance(sharding, dict):
        if "dims" not in sharding:
            raise ValueError("sharding %r has no dims (give a sharding as the service returns it)" % (sharding,))
        return [_axes_of(e) for e in sharding.get("dims") or []], [str(a) for a in sharding.get("unreduced") or []]
    return [_axes_of(e) for e in sharding], []


def partition_spec_entries(sharding: Sharding) -> Tuple[Any, ...]:
    """The entries of the JAX ``PartitionSpec`` of a returned sharding, as a tuple: ``None``
    for an unsharded dim, an axis name, or a tuple of names (major to minor), e.g.
    ``('data', None, ('x', 'y'))``; ``PartitionSpec(*entries)`` rebuilds it. Open flags
    and priorities are left out. Sub-axes (``"x:(1)2"``) have no PartitionSpec spelling:
    ValueError."""
    dims, _ = _dims_of(sharding)
    out: List[Any] = []
    for d, axes in enumerate(dims):
        for a in axes:
            if ":" in a:
                raise ValueError("dim %d uses sub-axis %r, which a PartitionSpec cannot name; use the sharding's text (Shardy) or hlo" % (d, a))
        out.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    return tuple(out)


def to_partition_spec(sharding: Sharding, partition_spec_cls: Any = None) -> Any:
    """A ``jax.sharding.PartitionSpec`` of a returned sharding (unreduced axes passed as
    ``unreduced=`` when there are any). ``partition_spec_cls`` defaults to JAX's class
    (imported only then)."""
    if partition_spec_cls is None:
        from jax.sharding import PartitionSpec as partition_spec_cls  # noqa: N813
    _, unreduced = _dims_of(sharding)
    entries = partition_spec_entries(sharding)
    if unreduced:
        return partition_spec_cls(*entries, unreduced=set(unreduced))
    return partition_spec_cls(*entries)


def to_named_sharding(sharding: Sharding, mesh: Any, named_sharding_cls: Any = None, partition_spec_cls: Any = None) -> Any:
    """A ``jax.sharding.NamedSharding(mesh, spec)`` of a returned sharding on the JAX
    ``mesh`` it was planned for. The classes default to JAX's (imported only then)."""
    if named_sharding_cls is None:
        from jax.sharding import NamedSharding as named_sharding_cls  # noqa: N813
    return named_sharding_cls(mesh, to_partition_spec(sharding, partition_spec_cls))


def _dtensor_order(mesh_dims: Sequence[int], strided: Sequence[bool], sizes: Sequence[int]) -> Optional[List[Tuple[int, int]]]:
    """The order in which DTensor splits one tensor dim given the mesh dims (ascending)
    that shard it and which of them are ``_StridedShard``, as
    torch.distributed.tensor._utils._explicit_order_placements computes it: a list of
    (mesh dim, split_factor or 0), major first; None when DTensor rejects it."""
    order: List[Tuple[int, int]] = []
    deferred: List[int] = []
    ended = False
    for i, st in zip(mesh_dims, strided):
        if st:
            deferred.append(i)
            continue
        if ended:
            return None
        order.append((i, 0))
        if deferred:
            ended = True
            aggregate = sizes[i]
            while deferred:
                j = deferred.pop()
                order.append((j, aggregate))
                aggregate *= sizes[j]
    return None if deferred else order


def to_placement_strings(sharding: Sharding, mesh_axis_names: Sequence[str], mesh_axis_sizes: Optional[Sequence[int]] = None) -> List[str]:
    """DTensor placements (as strings, one per mesh dim in mesh order) of a returned
    sharding: ``Shard(d)`` for an axis sharding tensor dim d, ``Partial(sum)`` for an
    unreduced axis, ``Replicate()`` otherwise, e.g. ``["Shard(0)", "Partial(sum)"]``.

    DTensor splits a dim sharded by several mesh dims in mesh dim order (the lowest mesh
    dim major). Another order needs ``_StridedShard(d, split_factor=f)`` placements (what
    FSDP2 + TP produce); give ``mesh_axis_sizes`` to get them. Orders DTensor cannot
    express and sub-axes: ValueError."""
    names = [str(a) for a in mesh_axis_names]
    sizes = [int(x) for x in mesh_axis_sizes] if mesh_axis_sizes is not None else None
    if sizes is not None and len(sizes) != len(names):
        raise ValueError("%d mesh axis sizes for %d mesh axes" % (len(sizes), len(names)))
    dims, unreduced = _dims_of(sharding)
    out = ["Replicate()"] * len(names)
    for d, axes in enumerate(dims):
        idx = []
        for a in axes:
            if ":" in a:
                raise ValueError("dim %d uses sub-axis %r, which DTensor placements cannot express" % (d, a))
            if a not in names:
                raise ValueError("dim %d: axis %r is not one of the mesh axes %s" % (d, a, names))
            idx.append(names.index(a))
        if idx == sorted(idx):
            for i in idx:
                out[i] = "Shard(%d)" % d
            continue
        if sizes is None:
            raise ValueError(
                "dim %d is sharded over %s, not in mesh order: DTensor needs _StridedShard for that; "
                "pass mesh_axis_sizes to get those placements, or redistribute to mesh order first" % (d, axes)
            )
        mesh_dims = sorted(idx)
        found = None
        for mask in range(1 << len(mesh_dims)):
            strided = [bool(mask >> k & 1) for k in range(len(mesh_dims))]
            order = _dtensor_order(mesh_dims, strided, sizes)
            if order is not None and [i for i, _ in order] == idx:
                found = order
                break
        if found is None:
            raise ValueError("dim %d is sharded over %s: no DTensor placements (Shard, _StridedShard) split it in that order" % (d, axes))
        for i, sf in found:
            out[i] = "_StridedShard(%d, split_factor=%d)" % (d, sf) if sf else "Shard(%d)" % d
    for a in unreduced:
        if a not in names:
            raise ValueError("unreduced axis %r is not one of the mesh axes %s" % (a, names))
        out[names.index(a)] = "Partial(sum)"
    return out


def to_placements(sharding: Sharding, mesh_axis_names: Sequence[str], shard_cls: Any = None, replicate_cls: Any = None, partial_cls: Any = None,
                  mesh_axis_sizes: Optional[Sequence[int]] = None, strided_shard_cls: Any = None) -> List[Any]:
    """DTensor placement objects of a returned sharding (see :func:`to_placement_strings`).
    The classes default to ``torch.distributed.tensor``'s (imported only then)."""
    strings = to_placement_strings(sharding, mesh_axis_names, mesh_axis_sizes)
    if shard_cls is None or replicate_cls is None or partial_cls is None:
        from torch.distributed.tensor import Partial, Replicate, Shard

        shard_cls, replicate_cls, partial_cls = shard_cls or Shard, replicate_cls or Replicate, partial_cls or Partial
    if strided_shard_cls is None and any(p.startswith("_StridedShard") for p in strings):
        from torch.distributed.tensor.placement_types import _StridedShard as strided_shard_cls  # noqa: N813
    out: List[Any] = []
    for p in strings:
        if p.startswith("_StridedShard("):
            dim, sf = p[len("_StridedShard("):-1].split(", split_factor=")
            out.append(strided_shard_cls(int(dim), split_factor=int(sf)))
        elif p.startswith("Shard("):
            out.append(shard_cls(int(p[len("Shard("):-1])))
        elif p.startswith("Partial"):
            out.append(partial_cls())
        else:
            out.append(replicate_cls())
    return out


# -- live objects in a request ----------------------------------------------------------


def _is_mesh(v: Any) -> bool:
    return hasattr(v, "axis_names") and not isinstance(v, (str, dict))


def _is_device_mesh(v: Any) -> bool:
    return "DeviceMesh" in _class_names(v) or hasattr(v, "mesh_dim_names")


def _is_dtensor(v: Any) -> bool:
    return hasattr(v, "placements") and hasattr(v, "device_mesh")


def _is_named_sharding(v: Any) -> bool:
    return hasattr(v, "spec") and hasattr(v, "mesh")


def _is_partition_spec(v: Any) -> bool:
    return any("PartitionSpec" in k for k in _class_names(v))


def _is_placements(v: Any) -> bool:
    if isinstance(v, (str, bytes, dict)) or not isinstance(v, (tuple, list)) or not v:
        return False
    return all(any(k in ("Shard", "_StridedShard", "StridedShard", "Replicate", "Partial", "_Partial") for k in _class_names(p)) for p in v)


def _mesh_of(v: Any) -> Mesh:
    if _is_device_mesh(v):
        return mesh_from_device_mesh(v)
    return mesh_from_jax(v)


def request_fields(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """A request body with the live framework objects in it turned into the API's forms,
    the way the converters above do it (duck-typed: neither framework is imported).

    ``mesh``: a ``jax.sharding.Mesh`` / ``AbstractMesh`` or a torch ``DeviceMesh``.
    ``sharding``, ``source``, ``target``: a ``NamedSharding`` (its mesh fills ``mesh`` when
    absent), a ``PartitionSpec``, DTensor placements (a tuple of ``Shard``/``Replicate``/
    ``Partial``/``_StridedShard``, as ``DTensor.placements``), or a DTensor itself (its
    placements; its device mesh, shape and dtype fill ``mesh``, ``shape`` and ``dtype``
    when absent). ``dtype``: a jax/numpy or torch dtype. ``shape``: any sequence of ints
    (``torch.Size``). Everything else is passed as given.
    """
    out: Dict[str, Any] = dict(fields)
    if "shape" in out and out["shape"] is not None and not isinstance(out["shape"], list):
        out["shape"] = [int(d) for d in out["shape"]]
    for key in ("sharding", "source", "target"):
        v = out.get(key)
        if _is_dtensor(v):
            out.setdefault("mesh", v.device_mesh)
            out.setdefault("shape", [int(d) for d in v.shape])
            if "dtype" not in out and "element_bytes" not in out and "tensor" not in out and getattr(v, "dtype", None) is not None:
                out["dtype"] = v.dtype
            out[key] = placements_json(v.placements)
        elif _is_named_sharding(v):
            out.setdefault("mesh", v.mesh)
            out[key] = v.spec
    for key in ("sharding", "source", "target"):
        v = out.get(key)
        if _is_partition_spec(v):
            shape = out.get("shape")
            rank = len(shape) if shape is not None else len(tuple(v))
            out[key] = spec_from_partition_spec(v, rank)
        elif _is_placements(v):
            out[key] = placements_json(v)
    if "mesh" in out and (_is_mesh(out["mesh"]) or _is_device_mesh(out["mesh"])):
        out["mesh"] = _mesh_of(out["mesh"])
    if "dtype" in out and out["dtype"] is not None and not isinstance(out["dtype"], str):
        out["dtype"] = dtype_name(out["dtype"])
    return out
