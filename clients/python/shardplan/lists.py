"""Expanding the compact per-device lists of a reshard step.

Above the server's list limit (``SHARDPLAN_LIST_DEVICE_LIMIT``), a step's
collective-permute pairs and all-to-all-v transfers come as runs: each run is
``count`` entries, the i-th being its first plus i times its step.
"""

from typing import Any, Dict, Iterator, List, Mapping, Sequence


def expand_pair_runs(runs: Sequence[Mapping[str, int]]) -> List[List[int]]:
    """The ``[from, to]`` pairs of ``pair_runs``, in run order."""
    out: List[List[int]] = []
    for r in runs:
        for i in range(r["count"]):
            out.append([r["from"] + i * r["from_step"], r["to"] + i * r["to_step"]])
    return out


def _add(first: Any, step: Any, i: int) -> Any:
    if isinstance(first, list):
        return [_add(a, b, i) for a, b in zip(first, step)]
    return first + i * step


def iter_transfer_runs(runs: Sequence[Mapping[str, Any]]) -> Iterator[Dict[str, Any]]:
    """Yields the transfers of ``transfer_runs`` one by one (a run can stand for many)."""
    for r in runs:
        first, step = r["first"], r["step"]
        for i in range(r["count"]):
            yield {k: _add(v, step[k], i) for k, v in first.items()}


def expand_transfer_runs(runs: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The transfers of ``transfer_runs``, in run order."""
    return list(iter_transfer_runs(runs))


def step_pairs(step: Mapping[str, Any]) -> List[List[int]]:
    """A collective-permute step's pairs, explicit or expanded from its runs."""
    if step.get("pairs"):
        return [list(p) for p in step["pairs"]]
    return expand_pair_runs(step.get("pair_runs") or [])


def step_transfers(step: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """An all-to-all-v step's transfers, explicit or expanded from its runs."""
    if step.get("transfers"):
        return list(step["transfers"])
    return expand_transfer_runs(step.get("transfer_runs") or [])
