"""Client tests against a running shardplan service.

The base URL comes from SHARDPLAN_URL; without it the class is skipped (the Go test
cmd/shardplan-server/python_client_test.go starts the real service and sets it).
"""

import http.server
import json
import os
import socket
import threading
import unittest

import shardplan
from shardplan import (
    placements_json,
    to_partition_spec,
    to_placement_strings,
    Client,
    ShardplanConnectionError,
    ShardplanError,
    from_named_sharding,
    mesh_from_device_mesh,
    sharding_from_placements,
    spec_from_partition_spec,
    step_pairs,
    to_partition_spec_string,
)
from tests.fakes import P, NamedSharding, Partial, Replicate, Shard, device_mesh, jax_mesh

URL = os.environ.get("SHARDPLAN_URL", "")


def repr_mesh(dm):
    """What torch prints for a DeviceMesh."""
    return "DeviceMesh(%r, %r, mesh_dim_names=%r)" % (dm.device_type, dm.mesh.tolist(), tuple(dm.mesh_dim_names))

# The API.md /v1/reshard example.
EXAMPLE = {"mesh": "X=2,Y=4", "shape": [2048, 2048], "dtype": "f32", "source": ["X", None], "target": ["Y", "X"]}

# Seed 003, case 4 ([D,(X,Y)] -> [-,(D,Y,X,T)]): XLA falls back to a full
# rematerialization (internal/planner/xla_test.go).
CASE4 = {
    "mesh": "C=1,D=2,Y=8,X=4,T=4",
    "shape": [2048, 2048],
    "dtype": "f32",
    "source": ["D", ["X", "Y"]],
    "target": [None, ["D", "Y", "X", "T"]],
}

# The API.md /v1/graph example.
GRAPH = {
    "mesh": {"name": "mesh", "axes": [{"name": "data", "size": 2}, {"name": "model", "size": 4}]},
    "tensors": {
        "x": {"shape": [8, 16], "dtype": "bf16", "sharding": ["data", None]},
        "w": {"shape": [16, 32], "dtype": "bf16", "sharding": '[{}, {"model"}]'},
        "y": {"shape": [8, 32], "dtype": "bf16"},
    },
    "ops": [
        {
            "name": "mm",
            "op": "dot_general",
            "operands": ["x", "w"],
            "results": ["y"],
            "attrs": {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]},
        }
    ],
    "options": {"conflict_resolution": "aggressive", "op_priority": True},
    "strategy": "optimal",
}


def axes(sharding):
    return [d["axes"] for d in sharding["dims"]]


@unittest.skipUnless(URL, "SHARDPLAN_URL is not set")
class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Client(URL, timeout=60)

    def test_healthz(self):
        self.assertEqual(self.c.healthz()["status"], "ok")

    def test_tiles(self):
        r = self.c.tiles(mesh="x=2,y=4", shape=[16, 23], dtype="f32", sharding=["x", "y"], locate=[[13, 17]])
        self.assertEqual(r["tile_shape"], [8, 6])
        self.assertEqual(len(r["devices"]), 8)
        self.assertEqual(r["devices"][0]["ranges"], [[0, 8], [0, 6]])
        self.assertEqual(axes(r["sharding"]), [["x"], ["y"]])
        self.assertEqual(len(r["locate"][0]["owners"]), 1)
        self.assertEqual(r.status, 200)

    def test_reshard_example_and_cache(self):
        body = dict(EXAMPLE, include=["transfers"])
        r = self.c.reshard(body)
        self.assertGreaterEqual(len(r["steps"]), 1)
        self.assertGreaterEqual(r["summary"]["collectives"], 1)
        self.assertIn("efficiency", r["summary"])
        self.assertGreater(r["summary"]["efficiency"], 0)
        self.assertEqual(r["steps"][0]["before"]["dims"], r["source"]["dims"])
        self.assertEqual(r["steps"][-1]["after"]["dims"], r["target"]["dims"])
        self.assertIn(r.cache, ("hit", "miss"))
        self.assertEqual(len(r["plan_id"]), 64)
        again = self.c.reshard(body)
        self.assertEqual(again.cache, "hit")
        self.assertEqual(again["plan_id"], r["plan_id"])
        # Keywords override the positional body.
        other = self.c.reshard(body, target=["X", "Y"])
        self.assertEqual(axes(other["target"]), [["X"], ["Y"]])

    def test_effort_fast(self):
        # Reshard 2 of testgen.RandomSet, whose fast plan is slower (examples/).
        body = {"mesh": "a=2,b=2,c=4,d=4,e=4", "shape": [256, 2048], "dtype": "bf16", "cost_model": "tpu-v5p",
                "source": '[{"c"}, {"e":(2)2, "b", "d", "a", "e":(1)2}]',
                "target": '[{"e", "c"}, {"b", "d", "a"}]'}
        thorough = self.c.reshard(body)
        fast = self.c.reshard(body, effort="fast")
        self.assertNotEqual(fast["plan_id"], thorough["plan_id"])
        self.assertLess(fast["summary"]["search_expansions"], thorough["summary"]["search_expansions"])
        self.assertGreater(fast["summary"]["time_us"], thorough["summary"]["time_us"])
        with self.assertRaises(ShardplanError) as cm:
            self.c.reshard(body, effort="quick")
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("effort", cm.exception.fields)

    def test_plan_lookup(self):
        r = self.c.reshard(EXAMPLE)
        got = self.c.plan(r["plan_id"])
        self.assertEqual(got["plan_id"], r["plan_id"])
        with self.assertRaises(ShardplanError) as cm:
            self.c.plan("0" * 64)
        self.assertEqual(cm.exception.status, 404)

    def test_schedule_by_plan_id(self):
        r = self.c.reshard(EXAMPLE, include=["schedule"])
        sched = r["schedule"]
        self.assertEqual(sched["kind"], "reshard")
        self.assertEqual(sched["phases"], len(r["steps"]))
        mine = self.c.schedule(r["plan_id"], rank=3)["schedule"]["ranks"]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["rank"], 3)
        self.assertEqual(mine[0], shardplan.rank_schedule(sched, 3))
        self.assertEqual([p["collective"] for p in mine[0]["phases"]], [s["op"] for s in r["steps"]])
        with self.assertRaises(ShardplanError) as cm:
            self.c.schedule(self.c.reshard(EXAMPLE)["plan_id"])
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(TypeError):
            self.c.schedule(r["plan_id"], rank="3")

    def test_transfer(self):
        body = {"cost_model": "h100", "fabric_devices": 8,
                "source": {"mesh": "fsdp=2,tp=2", "first_device": 0},
                "targets": [{"mesh": "tp=2", "first_device": 4}, {"mesh": "tp=2", "first_device": 6}],
                "tensors": [{"name": "w{i}", "shape": [64, 32], "dtype": "bf16", "source": [["fsdp", "tp"], None],
                             "target": ["tp", None], "repeat": 3}]}
        t = self.c.transfer(body)
        self.assertEqual(t["summary"]["tensors"], 3)
        self.assertNotIn("schedule", t)
        s = self.c.transfer(body, include=["schedule"])
        self.assertEqual(len(s["plan_id"]), 64)
        self.assertEqual(len(s["schedule"]["tensors"]), 3)
        rank5 = self.c.schedule(s["plan_id"], rank=5)["schedule"]["ranks"][0]
        self.assertTrue(any(op["op"] == "recv" for ph in rank5["phases"] for op in ph["ops"]))
        with self.assertRaises(ShardplanError) as cm:
            self.c.transfer(body, include=["nothing"])
        self.assertEqual(cm.exception.status, 400)

    def test_reshard_diagram(self):
        d = self.c.reshard_diagram(dict(EXAMPLE, shape=[8, 8]))
        self.assertIsInstance(d, str)
        self.assertIn("step 1", d)
        self.assertIn(d.cache, ("hit", "miss"))

    def test_reshard_from_jax(self):
        mesh = jax_mesh((2, 4), ("data", "model"), ids=[0, 1, 2, 3, 7, 6, 5, 4])
        m, src = from_named_sharding(NamedSharding(mesh, P("data")), 2)
        tgt = spec_from_partition_spec(P(None, ("data", "model")), 2)
        r = self.c.reshard(mesh=m, shape=[64, 128], dtype="bf16", source=src, target=tgt)
        self.assertEqual(axes(r["source"]), [["data"], []])
        self.assertEqual(axes(r["target"]), [[], ["data", "model"]])
        self.assertGreaterEqual(r["summary"]["collectives"], 1)
        self.assertEqual(to_partition_spec_string(r["target"]), "P(None, ('data','model'))")

    def test_reshard_from_dtensor_partial(self):
        dm = device_mesh((2, 4), ("dp", "tp"))
        mesh = mesh_from_device_mesh(dm)
        names = dm.mesh_dim_names
        src = sharding_from_placements([Partial(), Shard(1)], names, 2)
        tgt = sharding_from_placements([Shard(0), Shard(1)], names, 2)
        r = self.c.reshard(mesh=mesh, shape=[16, 32], dtype="f32", source=src, target=tgt)
        self.assertEqual(r["source"].get("unreduced"), ["dp"])
        ops = [s["op"] for s in r["steps"]]
        self.assertTrue({"reduce_scatter", "all_reduce"} & set(ops), ops)
        # And to a replicated tensor: the partial sums must be reduced.
        rep = sharding_from_placements([Replicate(), Replicate()], names, 2)
        r = self.c.reshard(mesh=mesh, shape=[16, 32], dtype="f32", source=src, target=rep)
        ops = [s["op"] for s in r["steps"]]
        self.assertTrue({"reduce_scatter", "all_reduce"} & set(ops), ops)

    def test_framework_strings(self):
        # XLA's and JAX's own printed shardings are accepted as they are, and every returned
        # sharding carries them back.
        r = self.c.reshard(mesh="X=2,Y=4", shape=[2048, 2048], dtype="float32",
                           source="{devices=[2,1,4]<=[8] last_tile_dim_replicate}", target="P('Y', 'X')")
        self.assertEqual(axes(r["source"]), [["X"], []])
        self.assertEqual(r["source"]["partition_spec"], "P('X', None)")
        self.assertEqual(r["target"]["hlo"], "{devices=[4,2]<=[2,4]T(1,0)}")
        self.assertEqual(tuple(to_partition_spec(r["target"], P)), ("Y", "X"))
        self.assertEqual(r["steps"][-1]["after"]["hlo"], r["target"]["hlo"])

    def test_live_objects_same_plan(self):
        # Live framework objects given as fields make the same canonical request as the
        # explicit forms: the same plan id.
        want = self.c.reshard(EXAMPLE)["plan_id"]
        mesh = jax_mesh((2, 4), ("X", "Y"))
        r = self.c.reshard(shape=(2048, 2048), dtype="float32",
                           source=NamedSharding(mesh, P("X")), target=NamedSharding(mesh, P("Y", "X")))
        self.assertEqual(r["plan_id"], want)
        dm = device_mesh((2, 4), ("X", "Y"))
        r = self.c.reshard(mesh=dm, tensor="tensor<2048x2048xf32>",
                           source=(Shard(0), Replicate()), target=(Shard(1), Shard(0)))
        self.assertEqual(r["plan_id"], want)
        # The printed forms too, as the frameworks print them.
        r = self.c.reshard(mesh=repr_mesh(dm), tensor="f32[2048,2048]",
                           source=repr((Shard(0), Replicate())), target='#sdy.sharding<@mesh, [{"Y"}, {"X"}]>')
        self.assertEqual(r["plan_id"], want)

    def test_dtensor_placements_round_trip(self):
        dm = device_mesh((2, 4), ("dp", "tp"))
        mesh = mesh_from_device_mesh(dm)
        r = self.c.reshard(mesh=mesh, shape=[16, 32], dtype="torch.float32",
                           source=placements_json([Shard(0), Partial()]),
                           target=placements_json([Shard(0), Shard(1)]))
        self.assertEqual([s["op"] for s in r["steps"]], ["reduce_scatter"])
        self.assertEqual(to_placement_strings(r["source"], dm.mesh_dim_names), ["Shard(0)", "Partial(sum)"])
        self.assertEqual(to_placement_strings(r["target"], dm.mesh_dim_names), ["Shard(0)", "Shard(1)"])
        # Another order round-trips through _StridedShard: the service orders it as DTensor.
        strided = to_placement_strings({"dims": [{"axes": ["tp", "dp"]}, {"axes": []}]}, dm.mesh_dim_names, [2, 4])
        r = self.c.tiles(mesh=mesh, shape=[16, 32], dtype="f32", sharding={"placements": strided})
        self.assertEqual(axes(r["sharding"]), [["tp", "dp"], []])
        with self.assertRaises(ShardplanError) as cm:
            self.c.reshard(mesh=mesh, shape=[16, 32], dtype="f32", source=placements_json([Shard(0), Partial("max")]),
                           target=placements_json([Shard(0), Shard(1)]))
        self.assertIn("source.placements[1]", cm.exception.fields)

    def test_400_field_paths(self):
        with self.assertRaises(ShardplanError) as cm:
            self.c.reshard(EXAMPLE, source=["X", None], target=["Y", "q"])
        e = cm.exception
        self.assertEqual(e.status, 400)
        self.assertTrue(e.type.startswith("https://"), e.type)
        self.assertTrue(e.title)
        self.assertIn("target[1]", e.fields)
        self.assertIn("q", e.detail)
        self.assertIn("target[1]", str(e))
        # The object form names the path inside it.
        with self.assertRaises(ShardplanError) as cm:
            self.c.tiles(mesh="x=2,y=4", shape=[16, 23], dtype="f32", sharding={"dims": [{"axes": ["x"]}, {"axes": ["q"]}]})
        self.assertIn("sharding.dims[1].axes[0]", cm.exception.fields)

    def test_422_policy_suggestions(self):
        with self.assertRaises(ShardplanError) as cm:
            self.c.reshard(CASE4, strategy="xla", policy={"forbid_full_rematerialization": True})
        e = cm.exception
        self.assertEqual(e.status, 422)
        self.assertTrue(e.violations)
        self.assertEqual(e.violations[0].get("policy"), "forbid_full_rematerialization")
        self.assertIsNotNone(e.plan)
        self.assertTrue(e.plan["summary"]["full_rematerialization"])
        self.assertTrue(e.suggested_constraints)
        s = e.suggested_constraints[0]
        self.assertEqual(to_partition_spec_string(s["sharding"]), s["partition_spec"])
        self.assertIn(s["partition_spec"], str(e))
        # Without the policy the same plan is a 200.
        r = self.c.reshard(CASE4, strategy="xla")
        self.assertTrue(r["summary"]["full_rematerialization"])

    def test_compact_lists(self):
        # 2,048 devices, over the server's list limit: the permute's pairs come as runs,
        # which expand to exactly the explicit list include=["pairs"] returns.
        body = dict(mesh="a=32,b=64", shape=[2048, 64], dtype="f32", source=[["a", "b"], None],
                    target=[["b", "a"], None], allowed_ops=["collective_permute"])
        compact = self.c.reshard(**body)
        step = compact["steps"][0]
        self.assertNotIn("pairs", step)
        self.assertLess(len(step["pair_runs"]), 2048)
        full = self.c.reshard(**body, include=["pairs"])
        self.assertEqual(sorted(step_pairs(step)), sorted(full["steps"][0]["pairs"]))

    def test_cost_models(self):
        ms = self.c.cost_models()
        names = [m["name"] for m in ms["models"]]
        self.assertIn(ms["default"], names)
        one = self.c.cost_model(names[0])
        self.assertEqual(one["name"], names[0])
        with self.assertRaises(ShardplanError) as cm:
            self.c.cost_model("no-such-model")
        self.assertEqual(cm.exception.status, 404)

    def test_graph(self):
        models = self.c.cost_models()
        names = {m["name"] for m in models["models"]}
        for m in models["models"]:
            names.update(m.get("aliases") or [])
        model = "h100-nvlink" if "h100-nvlink" in names else models["default"]
        r = self.c.graph(GRAPH, cost_model=model)
        sh = r["shardings"]
        for t in ("x", "w", "y"):
            self.assertIn(t, sh)
        self.assertEqual(axes(sh["x"]), [["data"], []])
        self.assertEqual(axes(sh["w"]), [[], ["model"]])
        # y = x @ w: rows follow x, columns follow w.
        self.assertEqual(axes(sh["y"]), [["data"], ["model"]])
        self.assertIn("summary", r)


    def test_graph_module(self):
        # A StableHLO module as jax.jit(f).lower(...).as_text() prints it (examples/).
        path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "graph-stablehlo-mlp.mlir")
        with open(path, encoding="utf-8") as f:
            module = f.read()
        r = self.c.graph(module=module, function="main")
        sh = r["shardings"]
        self.assertEqual(axes(sh["arg1"]), [[], ["model"]])
        self.assertEqual(sh["result0"]["partition_spec"], "P('data', None)")
        self.assertEqual(tuple(to_partition_spec(sh["arg1"], P)), (None, "model"))
        self.assertEqual([c["reduction"] for c in r["collectives"]], ["all_reduce"])


    def test_audit(self):
        # The MLP module before XLA: its one all_reduce at the line its loc names.
        examples = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples")
        with open(os.path.join(examples, "graph-stablehlo-mlp.mlir"), encoding="utf-8") as f:
            module = f.read()
        r = self.c.audit(module=module, memory_budget_bytes_per_device=1 << 20)
        self.assertEqual(r["input"], "program")
        self.assertEqual(r["sites"][0]["location"]["line"], 12)
        self.assertFalse(r["memory"]["over_budget"])
        # Seed 003's case 4 as XLA compiled it: the remat, and shardplan's plan beside it.
        with open(os.path.join(examples, "audit-seed003-case4.hlo"), encoding="utf-8") as f:
            hlo = f.read()
        r = self.c.audit(hlo_module=hlo, mesh="C=1,D=2,Y=8,X=4,T=4")
        self.assertEqual(r["input"], "compiled")
        self.assertEqual(r["remats"][0]["target_partition_spec"], "P(None, ('D','Y','X','T'))")
        self.assertGreater(r["remats"][0]["saved_us"], 0)
        text = self.c.audit_report(hlo_module=hlo, mesh="C=1,D=2,Y=8,X=4,T=4")
        self.assertIn("full rematerializations: 1", text)
        with self.assertRaises(TypeError):
            self.c.audit(hlo_module=b"bytes")


class _Capture(http.server.BaseHTTPRequestHandler):
    bodies = []

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("Content-Length", "0"))
        _Capture.bodies.append((self.path, self.headers.get("Content-Type"), json.loads(self.rfile.read(n))))
        out = b'{"shardings": {}, "collectives": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


class GraphModuleTest(unittest.TestCase):
    """graph(module=...) sends the module's text as {"module": ..., ...}."""

    def test_module_body(self):
        srv = http.server.HTTPServer(("127.0.0.1", 0), _Capture)
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        try:
            c = Client("http://127.0.0.1:%d" % srv.server_address[1], timeout=5)
            text = 'sdy.mesh @mesh = <["x"=2]>\nfunc.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  return %arg0 : tensor<8xf32>\n}\n'
            r = c.graph(module=text, function="main", strategy="xla")
            self.assertEqual(r["collectives"], [])
            path, ctype, body = _Capture.bodies[-1]
            self.assertEqual(path, "/v1/graph")
            self.assertEqual(ctype, "application/json")
            self.assertEqual(body, {"module": text, "function": "main", "strategy": "xla"})
            with self.assertRaises(TypeError):
                c.graph(module=b"bytes")
        finally:
            srv.shutdown()
            srv.server_close()


class ConnectionTest(unittest.TestCase):
    def test_unreachable(self):
        # A port that was just free: nothing listens there.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        c = Client("http://127.0.0.1:%d" % port, timeout=5)
        with self.assertRaises(ShardplanConnectionError) as cm:
            c.healthz()
        self.assertIsNone(cm.exception.status)
        self.assertIsInstance(cm.exception, ShardplanError)


if __name__ == "__main__":
    unittest.main()
