"""A reference executor of shardplan schedules on torch.distributed.

``run(schedule, rank, tensors)`` moves the bytes one rank's schedule says, phase by
phase, with ``torch.distributed`` point-to-point operations (any backend with
``isend``/``irecv``: gloo on CPU, NCCL on GPUs). A schedule is the ``schedule`` member
of a reshard or transfer answer asked with ``include: ["schedule"]``, or of
``Client.schedule(plan_id, rank=...)``; docs/API.md ("Schedules") says what every
operation means. torch is imported when ``run`` is called: the rest of the client needs
the standard library alone.
"""

from typing import Any, Dict, List, Mapping, Optional, Tuple

__all__ = ["run", "rank_schedule", "expand_rank_run"]

def _add(first: Any, step: Any, i: int) -> Any:
    """first plus i times step, number by number (texts and flags are first's)."""
    if isinstance(first, bool):
        return first
    if isinstance(first, int):
        return first + i * (step or 0)
    if isinstance(first, list):
        step = step if isinstance(step, list) else [None] * len(first)
        return [_add(f, s, i) for f, s in zip(first, step)]
    if isinstance(first, dict):
        step = step if isinstance(step, dict) else {}
        return {k: _add(v, step.get(k), i) for k, v in first.items()}
    return first


def expand_rank_run(run: Mapping[str, Any], i: int) -> Dict[str, Any]:
    """The i-th rank (0 <= i < count) of a ``rank_runs`` entry."""
    if not 0 <= i < run["count"]:
        raise IndexError("rank run of %d ranks has no entry %d" % (run["count"], i))
    return _add(run["first"], run["step"], i)


def rank_schedule(schedule: Mapping[str, Any], rank: int) -> Optional[Dict[str, Any]]:
    """Rank ``rank``'s schedule out of ``ranks`` or ``rank_runs``; None when it has none."""
    for r in schedule.get("ranks") or []:
        if r["rank"] == rank:
            return dict(r)
    for run in schedule.get("rank_runs") or []:
        first = run["first"]["rank"]
        step = run["step"]["rank"]
        d = rank - first
        if d == 0:
            return expand_rank_run(run, 0)
        if step and d % step == 0 and 0 < d // step < run["count"]:
            return expand_rank_run(run, d // step)
    return None


def _slices(box: List[List[int]]) -> Tuple[slice, ...]:
    return tuple(slice(lo, hi) for lo, hi in box)


def _extent(box: List[List[int]]) -> List[int]:
    return [hi - lo for lo, hi in box]


_TAG_BASE = 1 << 20

_DTYPES = {8: "uint8", 16: "bfloat16", 32: "float32", 64: "float64"}


def run(schedule: Mapping[str, Any], rank: int, tensors: Any, *, dtype: Any = None,
        peer_rank: Any = None, group: Any = None) -> Any:
    """Runs rank ``rank``'s part of ``schedule`` and returns what the rank ends with.

    Every rank of the schedule calls it at the same time (each its own process, after
    ``torch.distributed.init_process_group``). ``tensors`` is what the rank holds:

    * reshard: its source tile, a tensor of the tile's shape; ``run`` returns its
      target tile;
    * transfer: a mapping from tensor name (or index into ``schedule["tensors"]``) to
      the rank's source tile of that tensor; ``run`` returns a dict from tensor name to
      its target tile (to a dict from target placement index to tile when the rank is
      in several targets).

    ``dtype`` is the element type of buffers ``run`` allocates when no source tile
    says it (default: float32, or the schedule's element width); ``peer_rank`` maps a
    schedule rank (a device id) to a process rank (default: the same number);
    ``group`` is the process group (default: the world).
    """
    import torch
    import torch.distributed as dist

    kind = schedule.get("kind")
    mine = rank_schedule(schedule, rank)
    if mine is None:
        mine = {"rank": rank, "buffers": [], "phases": []}
    to_proc = peer_rank or (lambda r: r)
    infos = schedule.get("tensors") or []

    def dtype_of(t: int, like: Any = None) -> Any:
        if like is not None:
            return like.dtype
        if dtype is not None:
            return dtype
        bits = infos[t]["element_bits"] if t < len(infos) else 32
        return getattr(torch, _DTYPES.get(bits, "float32"))

    bufs: Dict[Tuple[int, str, int], Any] = {}
    source_like: Dict[int, Any] = {}
    for b in mine["buffers"]:
        key = (b["tensor"], b["buffer"], b.get("index", 0))
        shape = _extent(b["global"])
        if b["buffer"] in ("tile", "source"):
            if kind == "reshard":
                src = tensors
            else:
                name = infos[b["tensor"]]["name"]
                src = tensors[name] if name in tensors else tensors[b["tensor"]]
            if list(src.shape) != shape:
                raise ValueError("rank %d: the %s tile of tensor %d has shape %s, the schedule says %s"
                                 % (rank, b["buffer"], b["tensor"], list(src.shape), shape))
            bufs[key] = src
            source_like[b["tensor"]] = src
    for b in mine["buffers"]:
        if b["buffer"] == "target":
            t = b["tensor"]
            bufs[(t, "target", b.get("index", 0))] = torch.zeros(_extent(b["global"]), dtype=dtype_of(t, source_like.get(t)))

    for ph in mine["phases"]:
        old = dict(bufs)
        cur = dict(bufs)
        for nb in ph.get("new_buffers") or []:
            t = nb["tensor"]
            cur[(t, nb["buffer"], nb.get("index", 0))] = torch.zeros(_extent(nb["global"]), dtype=dtype_of(t, source_like.get(t)))
        if kind == "reshard" and not ph.get("keeps_tile"):
            like = old.get((0, "tile", 0))
            cur[(0, "tile", 0)] = torch.zeros(_extent(ph["tile"]), dtype=dtype_of(0, like))
        # Every send reads the buffers as the phase began; every receive lands in a
        # buffer of its own until all have arrived.
        reqs = []
        arrived: Dict[int, Any] = {}
        for i, op in enumerate(ph["ops"]):
            t = op["tensor"]
            if op["op"] == "send":
                src = old[(t, op["src"], op.get("src_index", 0))]
                data = src[_slices(op["src_local"])].contiguous()
                reqs.append(dist.isend(data, to_proc(op["peer"]), group=group, tag=_TAG_BASE + op.get("tag", 0)))
            elif op["op"] == "recv":
                like = cur[(t, op["dst"], op.get("dst_index", 0))]
                data = torch.empty(_extent(op["global"]), dtype=like.dtype)
                arrived[i] = data
                reqs.append(dist.irecv(data, to_proc(op["peer"]), group=group, tag=_TAG_BASE + op.get("tag", 0)))
        for r in reqs:
            r.wait()
        for i, op in enumerate(ph["ops"]):
            t = op["tensor"]
            if op["op"] == "send":
                continue
            if op["op"] == "recv":
                data = arrived[i]
            else:
                srcs = old if op["src"] in ("tile", "halo") else cur
                data = srcs[(t, op["src"], op.get("src_index", 0))][_slices(op["src_local"])]
            dst = cur[(t, op["dst"], op.get("dst_index", 0))]
            view = dst[_slices(op["dst_local"])]
            if op.get("reduce"):
                view.add_(data)
            else:
                view.copy_(data)
        if kind == "reshard" and not ph.get("halo"):
            cur = {k: v for k, v in cur.items() if k[1] != "halo"}
        bufs = cur

    if kind == "reshard":
        return bufs.get((0, "tile", 0), tensors)
    out: Dict[Any, Any] = {}
    for (t, name, index), v in sorted(bufs.items(), key=lambda kv: kv[0]):
        if name != "target":
            continue
        tname = infos[t]["name"] if t < len(infos) else t
        out.setdefault(tname, {})[index] = v
    return {k: (next(iter(v.values())) if len(v) == 1 else v) for k, v in out.items()}
