"""Runs shardplan schedules on real bytes: N processes on torch.distributed (gloo, CPU).

Spawned by cmd/shardplan-server's TestPythonExecutor as ``python3 executor_driver.py CASES.json``.
The cases file names the server (``base``), the process count (``world``) and the
plans (``cases``: a plan id per case, asked with include "schedule"). Every process
fetches its own rank's schedule by plan id (``Client.schedule``), builds its source
tiles, runs ``shardplan.run`` and compares what it ends with to the target tiles it
must hold, element for element (``torch.equal``). Element i of a tensor (row-major
global index) is ``64 * i + 1_000_003 * t`` (t the tensor's index); a reshard's source
that holds partial sums adds its partial's number c on rank r (``partial``), and a
target rank's element is the sum over the partials it adds up (``want``): every value
is an integer, exact in float64, so the comparison is bit for bit. Rank 0 prints one
JSON line per case (``{"case", "ok", "wall_us", ...}``); the exit status is 1 when any
rank of any case differs.
"""

import json
import os
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import shardplan  # noqa: E402
from shardplan import Client, ShardplanError  # noqa: E402


def values(shape, box, t=0):
    """The tensor's values on box (global [lo, hi) per dim), float64."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    idx = torch.zeros([hi - lo for lo, hi in box], dtype=torch.float64)
    for d, (lo, hi) in enumerate(box):
        view = [1] * len(box)
        view[d] = hi - lo
        idx = idx + (torch.arange(lo, hi, dtype=torch.float64) * strides[d]).reshape(view)
    return idx * 64 + 1_000_003 * t


def prepare(client, case, rank):
    """Fetches rank's schedule of case and builds its inputs; returns a function that
    runs it and checks what it ends with (ok, detail)."""
    try:
        sched = client.schedule(case["plan_id"], rank=rank)["schedule"]
    except ShardplanError as e:
        if e.status != 404:  # a transfer rank that neither sends nor receives
            raise
        sched = {"kind": case["kind"], "tensors": [], "ranks": []}
    mine = shardplan.rank_schedule(sched, rank)
    if case["kind"] == "reshard":
        c = case.get("partial", {}).get(str(rank), 0)
        want = case.get("want", {}).get(str(rank), [0])
        src_box = mine["buffers"][0]["global"]
        src = values(case["shape"], src_box) + c
        tgt_box = mine["phases"][-1]["tile"]
        expect = values(case["shape"], tgt_box) * len(want) + sum(want)

        def go():
            got = shardplan.run(sched, rank, src)
            if list(got.shape) != list(expect.shape):
                return False, "rank %d: a tile of shape %s, want %s" % (rank, list(got.shape), list(expect.shape))
            if not torch.equal(got, expect):
                return False, "rank %d: tile %s differs at %s" % (rank, tgt_box, (got != expect).nonzero()[:3].tolist())
            return True, ""
        return go
    infos = sched["tensors"]
    tensors, targets = {}, []
    for b in (mine or {}).get("buffers", []):
        t = b["tensor"]
        if b["buffer"] == "source":
            tensors[infos[t]["name"]] = values(infos[t]["shape"], b["global"], t)
        elif b["buffer"] == "target":
            targets.append(b)

    def go():
        got = shardplan.run(sched, rank, tensors, dtype=torch.float64)
        for b in targets:
            t = b["tensor"]
            g = got[infos[t]["name"]]
            if isinstance(g, dict):
                g = g[b["index"]]
            if not torch.equal(g, values(infos[t]["shape"], b["global"], t)):
                return False, "rank %d: target tile of %s at %s differs" % (rank, infos[t]["name"], b["global"])
        return True, "%d target tiles" % len(targets)
    return go


def worker(rank, world, store, cases_path):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    with open(cases_path) as f:
        spec = json.load(f)
    client = Client(spec["base"], timeout=60)
    failed = 0
    for case in spec["cases"]:
        ok, elapsed, detail, go = True, 0.0, "", None
        if rank < case["ranks"]:
            try:
                go = prepare(client, case, rank)
            except Exception:  # a rank that fails reports it; the others go on
                ok, detail = False, "rank %d: %s" % (rank, traceback.format_exc())
        # Every rank takes part in every collective of the driver, whatever failed; when
        # some rank could not prepare, none runs (its peers would wait for it).
        ready = torch.tensor([0.0 if ok else 1.0])
        dist.all_reduce(ready, op=dist.ReduceOp.SUM)
        if ready.item() == 0 and go is not None:
            t0 = time.perf_counter()
            try:
                ok, detail = go()
            except Exception:
                ok, detail = False, "rank %d: %s" % (rank, traceback.format_exc())
            elapsed = time.perf_counter() - t0
        flags = torch.tensor([0.0 if ok else 1.0, elapsed])
        dist.all_reduce(flags[:1], op=dist.ReduceOp.SUM)
        dist.all_reduce(flags[1:], op=dist.ReduceOp.MAX)
        details = [None] * world
        dist.all_gather_object(details, detail if not ok else None)
        if rank == 0:
            print(json.dumps({"case": case["name"], "ok": flags[0].item() == 0, "wall_us": round(flags[1].item() * 1e6, 1),
                              "predicted_us": case.get("predicted_us"), "ranks": case["ranks"],
                              "errors": [d for d in details if d]}), flush=True)
        failed += int(flags[0].item() != 0)
    dist.barrier()
    dist.destroy_process_group()
    if failed:
        sys.exit(1)


def main():
    cases_path = sys.argv[1]
    with open(cases_path) as f:
        world = json.load(f)["world"]
    fd, store = tempfile.mkstemp(prefix="shardplan-gloo-")
    os.close(fd)
    os.remove(store)
    try:
        mp.spawn(worker, args=(world, store, cases_path), nprocs=world, join=True)
    finally:
        if os.path.exists(store):
            os.remove(store)


if __name__ == "__main__":
    main()
