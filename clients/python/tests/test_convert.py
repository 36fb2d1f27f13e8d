"""Pure converter tests: stand-ins for the JAX and PyTorch objects, no server."""

import unittest

from shardplan import (
    partition_spec_entries,
    placements_json,
    request_fields,
    to_named_sharding,
    to_partition_spec,
    to_placement_strings,
    to_placements,
    dtype_name,
    from_dtensor,
    from_named_sharding,
    mesh_from_device_mesh,
    mesh_from_jax,
    sharding_from_placements,
    spec_from_partition_spec,
    to_partition_spec_string,
)
from tests.fakes import (
    P,
    AbstractMesh,
    DTensor,
    FakeArray,
    Mesh,
    NamedSharding,
    Partial,
    Replicate,
    Shard,
    _StridedShard,
    device_mesh,
    jax_mesh,
)


class JaxMeshTest(unittest.TestCase):
    def test_mesh_axes_and_ids(self):
        m = jax_mesh((2, 4), ("x", "y"), ids=[0, 2, 4, 6, 1, 3, 5, 7])
        self.assertEqual(
            mesh_from_jax(m),
            {"name": "mesh", "axes": [{"name": "x", "size": 2}, {"name": "y", "size": 4}], "device_ids": [0, 2, 4, 6, 1, 3, 5, 7]},
        )

    def test_name_and_without_ids(self):
        m = jax_mesh((8,), ("data",))
        self.assertEqual(mesh_from_jax(m, name="m", include_device_ids=False), {"name": "m", "axes": [{"name": "data", "size": 8}]})

    def test_abstract_mesh_uses_shape_mapping(self):
        m = AbstractMesh((2, 2, 4), ("a", "b", "c"))
        self.assertEqual(mesh_from_jax(m), {"name": "mesh", "axes": [{"name": "a", "size": 2}, {"name": "b", "size": 2}, {"name": "c", "size": 4}]})

    def test_ids_not_a_permutation(self):
        m = jax_mesh((2,), ("x",), ids=[100000, 100001])
        with self.assertRaisesRegex(ValueError, "permutation"):
            mesh_from_jax(m)
        self.assertNotIn("device_ids", mesh_from_jax(m, include_device_ids=False))

    def test_devices_without_id_attribute(self):
        # Integers stand in for devices (as in some tests of JAX code).
        m = Mesh(FakeArray([3, 2, 1, 0], (2, 2)), ("x", "y"))
        self.assertEqual(mesh_from_jax(m)["device_ids"], [3, 2, 1, 0])


class PartitionSpecTest(unittest.TestCase):
    def test_entries_and_padding(self):
        self.assertEqual(spec_from_partition_spec(P("x", None, ("y", "z")), 4), ["x", None, ["y", "z"], None])

    def test_empty_and_none(self):
        self.assertEqual(spec_from_partition_spec(P(), 2), [None, None])
        self.assertEqual(spec_from_partition_spec(None, 1), [None])
        self.assertEqual(spec_from_partition_spec(P((), ("x",)), 2), [None, "x"])

    def test_plain_tuple(self):
        self.assertEqual(spec_from_partition_spec(("x", ["y"]), 2), ["x", "y"])

    def test_too_many_entries(self):
        with self.assertRaisesRegex(ValueError, "rank-1"):
            spec_from_partition_spec(P("x", "y"), 1)

    def test_bad_entry(self):
        with self.assertRaises(ValueError):
            spec_from_partition_spec(P(3.5), 1)

    def test_unconstrained_is_open(self):
        self.assertEqual(
            spec_from_partition_spec(P("x", P.UNCONSTRAINED), 3),
            {"dims": [{"axes": ["x"]}, {"axes": [], "open": True}, {"axes": []}]},
        )

    def test_unreduced(self):
        self.assertEqual(
            spec_from_partition_spec(P(None, "y", unreduced={"x"}), 2),
            {"dims": [{"axes": []}, {"axes": ["y"]}], "unreduced": ["x"]},
        )

    def test_named_sharding(self):
        ns = NamedSharding(jax_mesh((2, 4), ("data", "model")), P("data"))
        mesh, spec = from_named_sharding(ns, 2)
        self.assertEqual(mesh["axes"], [{"name": "data", "size": 2}, {"name": "model", "size": 4}])
        self.assertEqual(mesh["device_ids"], list(range(8)))
        self.assertEqual(spec, ["data", None])


class DTensorTest(unittest.TestCase):
    def test_device_mesh(self):
        dm = device_mesh((2, 4), ("dp", "tp"), ranks=[4, 5, 6, 7, 0, 1, 2, 3])
        self.assertEqual(
            mesh_from_device_mesh(dm),
            {"name": "mesh", "axes": [{"name": "dp", "size": 2}, {"name": "tp", "size": 4}], "device_ids": [4, 5, 6, 7, 0, 1, 2, 3]},
        )

    def test_device_mesh_without_names(self):
        dm = device_mesh((2, 2), None)
        self.assertEqual([a["name"] for a in mesh_from_device_mesh(dm)["axes"]], ["dim_0", "dim_1"])

    def test_sub_mesh_ranks(self):
        dm = device_mesh((4,), ("tp",), ranks=[4, 5, 6, 7])
        with self.assertRaisesRegex(ValueError, "include_device_ids=False"):
            mesh_from_device_mesh(dm)
        self.assertEqual(mesh_from_device_mesh(dm, include_device_ids=False), {"name": "mesh", "axes": [{"name": "tp", "size": 4}]})

    def test_shard_replicate(self):
        self.assertEqual(
            sharding_from_placements([Shard(0), Replicate()], ["dp", "tp"], 2),
            {"dims": [{"axes": ["dp"]}, {"axes": []}], "unreduced": []},
        )

    def test_negative_dim(self):
        self.assertEqual(sharding_from_placements([Shard(-1)], ["tp"], 3)["dims"][2], {"axes": ["tp"]})

    def test_same_dim_major_to_minor_by_mesh_dim(self):
        s = sharding_from_placements([Shard(1), Replicate(), Shard(1)], ["a", "b", "c"], 2)
        self.assertEqual(s["dims"], [{"axes": []}, {"axes": ["a", "c"]}])

    def test_partial_is_unreduced(self):
        s = sharding_from_placements([Partial(), Shard(1)], ["dp", "tp"], 2)
        self.assertEqual(s, {"dims": [{"axes": []}, {"axes": ["tp"]}], "unreduced": ["dp"]})

    def test_strided_shard_rejected(self):
        with self.assertRaisesRegex(ValueError, "_StridedShard"):
            sharding_from_placements([_StridedShard(0, 2), Shard(0)], ["dp", "tp"], 2)

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "2 placements"):
            sharding_from_placements([Shard(0), Shard(1)], ["x"], 2)
        with self.assertRaisesRegex(ValueError, "out of range"):
            sharding_from_placements([Shard(2)], ["x"], 2)
        with self.assertRaisesRegex(ValueError, "unsupported"):
            sharding_from_placements([object()], ["x"], 2)

    def test_from_dtensor(self):
        t = DTensor(device_mesh((2, 2), ("dp", "tp")), [Shard(0), Partial()], (8, 4))
        mesh, s = from_dtensor(t)
        self.assertEqual([a["name"] for a in mesh["axes"]], ["dp", "tp"])
        self.assertEqual(s, {"dims": [{"axes": ["dp"]}, {"axes": []}], "unreduced": ["tp"]})


class PartitionSpecStringTest(unittest.TestCase):
    def test_object_form(self):
        s = {"dims": [{"axes": ["D"]}, {"axes": ["X", "Y", "T"]}, {"axes": []}], "text": "ignored"}
        self.assertEqual(to_partition_spec_string(s), "P('D', ('X','Y','T'), None)")

    def test_unreduced(self):
        s = {"dims": [{"axes": []}, {"axes": ["tp"]}], "unreduced": ["dp"]}
        self.assertEqual(to_partition_spec_string(s), "P(None, 'tp', unreduced={'dp'})")

    def test_array_form_round_trip(self):
        spec = spec_from_partition_spec(P("x", None, ("y", "z")), 3)
        self.assertEqual(to_partition_spec_string(spec), "P('x', None, ('y','z'))")

    def test_sub_axis_rejected(self):
        with self.assertRaisesRegex(ValueError, "sub-axis"):
            to_partition_spec_string({"dims": [{"axes": ["X", "Y:(1)2"]}]})

    def test_rank_zero(self):
        self.assertEqual(to_partition_spec_string({"dims": []}), "P()")


class DtypeTest(unittest.TestCase):
    def test_names(self):
        class TorchDtype:
            def __str__(self):
                return "torch.bfloat16"

        class NumpyDtype:
            name = "float32"

        self.assertEqual(dtype_name(TorchDtype()), "bf16")
        self.assertEqual(dtype_name(NumpyDtype()), "f32")
        self.assertEqual(dtype_name("int8"), "s8")
        self.assertEqual(dtype_name("f8e4m3fn"), "f8e4m3fn")
        with self.assertRaises(ValueError):
            dtype_name("quaternion")



class BackToFrameworksTest(unittest.TestCase):
    """From a sharding as the service returns it back to JAX and DTensor objects."""

    RETURNED = {
        "dims": [{"axes": ["dp"]}, {"axes": []}, {"axes": ["tp", "sp"], "open": True}],
        "unreduced": ["ep"],
        "text": "ignored",
        "hlo": "ignored",
    }

    def test_partition_spec_entries(self):
        self.assertEqual(partition_spec_entries(self.RETURNED), ("dp", None, ("tp", "sp")))
        self.assertEqual(partition_spec_entries(["x", None, ["y"]]), ("x", None, "y"))
        self.assertEqual(partition_spec_entries({"dims": []}), ())
        with self.assertRaises(ValueError):
            partition_spec_entries({"dims": [{"axes": ["x:(1)2"]}]})
        with self.assertRaises(ValueError):
            partition_spec_entries({"placements": ["Shard(0)"]})

    def test_to_partition_spec_and_named_sharding(self):
        spec = to_partition_spec(self.RETURNED, P)
        self.assertEqual(tuple(spec), ("dp", None, ("tp", "sp")))
        self.assertEqual(spec.unreduced, frozenset({"ep"}))
        mesh = jax_mesh((2, 2, 2, 2), ("dp", "tp", "sp", "ep"))
        ns = to_named_sharding({"dims": [{"axes": ["dp"]}]}, mesh, NamedSharding, P)
        self.assertIs(ns.mesh, mesh)
        self.assertEqual(tuple(ns.spec), ("dp",))
        # Round trip: JAX -> API -> JAX.
        back = to_partition_spec(spec_from_partition_spec(P("dp", ("tp", "sp")), 3), P)
        self.assertEqual(tuple(back), ("dp", ("tp", "sp"), None))

    def test_to_placements(self):
        names = ["dp", "tp", "sp", "ep"]
        self.assertEqual(to_placement_strings(self.RETURNED, names), ["Shard(0)", "Shard(2)", "Shard(2)", "Partial(sum)"])
        ps = to_placements(self.RETURNED, names, Shard, Replicate, Partial)
        self.assertEqual([type(p).__name__ for p in ps], ["Shard", "Shard", "Shard", "Partial"])
        self.assertEqual([p.dim for p in ps[:3]], [0, 2, 2])
        self.assertEqual(to_placement_strings({"dims": [{"axes": []}]}, ["x"]), ["Replicate()"])
        # Round trip: DTensor -> API -> DTensor.
        src = sharding_from_placements([Shard(1), Partial(), Shard(1)], ["a", "b", "c"], 2)
        self.assertEqual(to_placement_strings(src, ["a", "b", "c"]), ["Shard(1)", "Partial(sum)", "Shard(1)"])

    def test_to_placements_errors(self):
        with self.assertRaises(ValueError) as cm:
            to_placement_strings({"dims": [{"axes": ["tp", "dp"]}]}, ["dp", "tp"])
        self.assertIn("_StridedShard", str(cm.exception))
        with self.assertRaises(ValueError):
            to_placement_strings({"dims": [{"axes": ["dp:(1)2"]}]}, ["dp"])
        with self.assertRaises(ValueError):
            to_placement_strings({"dims": [{"axes": ["zz"]}]}, ["dp"])

    def test_strided_placements(self):
        # dim 0 over tp then dp (FSDP2 + TP): _StridedShard on dp, as DTensor orders it.
        self.assertEqual(
            to_placement_strings({"dims": [{"axes": ["tp", "dp"]}]}, ["dp", "tp"], [2, 4]),
            ["_StridedShard(0, split_factor=4)", "Shard(0)"],
        )
        # Three mesh dims, [c, a, b]: a and b strided behind c.
        self.assertEqual(
            to_placement_strings({"dims": [{"axes": ["c", "b", "a"]}]}, ["a", "b", "c"], [2, 3, 5]),
            ["_StridedShard(0, split_factor=15)", "_StridedShard(0, split_factor=5)", "Shard(0)"],
        )
        ps = to_placements({"dims": [{"axes": ["tp", "dp"]}]}, ["dp", "tp"], Shard, Replicate, Partial, [2, 4], _StridedShard)
        self.assertEqual([type(p).__name__ for p in ps], ["_StridedShard", "Shard"])
        self.assertEqual(ps[0].split_factor, 4)
        # [b, c, a] is no order DTensor's rule produces (a strided part may not be followed by Shard).
        with self.assertRaises(ValueError):
            to_placement_strings({"dims": [{"axes": ["b", "a", "c"]}]}, ["a", "b", "c"], [2, 2, 2])

    def test_placements_json(self):
        got = placements_json([Shard(0), Replicate(), Partial(), _StridedShard(1, 4), "Shard(1)"])
        self.assertEqual(got, {"placements": ["Shard(0)", "Replicate()", "Partial(sum)", "_StridedShard(1, split_factor=4)", "Shard(1)"]})
        with self.assertRaises(ValueError):
            placements_json([object()])


if __name__ == "__main__":
    unittest.main()


class RequestFieldsTest(unittest.TestCase):
    """request_fields turns live objects into the API's forms, as the converters do."""

    def test_jax_mesh_and_named_sharding(self):
        mesh = jax_mesh((2, 4), ("X", "Y"), ids=[0, 1, 2, 3, 7, 6, 5, 4])
        body = request_fields({"shape": (64, 128), "dtype": "bf16",
                               "source": NamedSharding(mesh, P("X")), "target": P(None, ("X", "Y"))})
        self.assertEqual(body["mesh"], mesh_from_jax(mesh))
        self.assertEqual(body["shape"], [64, 128])
        self.assertEqual(body["source"], ["X", None])
        self.assertEqual(body["target"], [None, ["X", "Y"]])

    def test_abstract_mesh(self):
        body = request_fields({"mesh": AbstractMesh((2, 4), ("a", "b")), "shape": [8], "sharding": P("a")})
        self.assertEqual(body["mesh"]["axes"], [{"name": "a", "size": 2}, {"name": "b", "size": 4}])
        self.assertEqual(body["sharding"], ["a"])

    def test_device_mesh_and_placements(self):
        dm = device_mesh((2, 2), ("dp", "tp"), ranks=[0, 2, 1, 3])
        body = request_fields({"mesh": dm, "shape": [8, 8], "dtype": "f32",
                               "source": (Shard(0), Replicate()), "target": [_StridedShard(0, 2), Shard(0)],
                               "sharding": (Partial(), Shard(1))})
        self.assertEqual(body["mesh"], mesh_from_device_mesh(dm))
        self.assertEqual(body["mesh"]["device_ids"], [0, 2, 1, 3])
        self.assertEqual(body["source"], {"placements": ["Shard(0)", "Replicate()"]})
        self.assertEqual(body["target"], {"placements": ["_StridedShard(0, split_factor=2)", "Shard(0)"]})
        self.assertEqual(body["sharding"], {"placements": ["Partial(sum)", "Shard(1)"]})

    def test_dtensor_fills_mesh_and_shape(self):
        dm = device_mesh((2, 4), ("dp", "tp"))
        t = DTensor(dm, [Shard(1), Replicate()], (16, 32))
        body = request_fields({"source": t, "target": (Replicate(), Replicate()), "dtype": "f32"})
        self.assertEqual(body["mesh"], mesh_from_device_mesh(dm))
        self.assertEqual(body["shape"], [16, 32])
        self.assertEqual(body["source"], {"placements": ["Shard(1)", "Replicate()"]})
        self.assertEqual(body["target"], {"placements": ["Replicate()", "Replicate()"]})

    def test_plain_values_unchanged(self):
        plain = {"mesh": "X=2", "shape": [4], "dtype": "f32", "source": ["X"], "target": "P(None)",
                 "cost_model": {"base": "h100"}}
        self.assertEqual(request_fields(plain), plain)
