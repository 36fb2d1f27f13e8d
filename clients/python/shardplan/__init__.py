"""Python client for the shardplan sharding-planner service (standard library only).

>>> from shardplan import Client
>>> c = Client("http://127.0.0.1:8080")
>>> plan = c.reshard(mesh="X=2,Y=4", shape=[2048, 2048], dtype="f32",
...                  source=["X", None], target=["Y", "X"])  # doctest: +SKIP
"""

from .client import DEFAULT_URL, Client, Result, TextResult
from .convert import (
    dtype_name,
    from_dtensor,
    from_named_sharding,
    mesh_from_device_mesh,
    mesh_from_jax,
    sharding_from_placements,
    spec_from_partition_spec,
    partition_spec_entries,
    placements_json,
    request_fields,
    to_named_sharding,
    to_partition_spec,
    to_partition_spec_string,
    to_placement_strings,
    to_placements,
)
from .errors import ShardplanConnectionError, ShardplanError
from .execute import expand_rank_run, rank_schedule, run
from .lists import expand_pair_runs, expand_transfer_runs, iter_transfer_runs, step_pairs, step_transfers

__version__ = "0.1.0"

__all__ = [
    "Client",
    "run",
    "rank_schedule",
    "expand_rank_run",
    "expand_pair_runs",
    "expand_transfer_runs",
    "iter_transfer_runs",
    "step_pairs",
    "step_transfers",
    "Result",
    "TextResult",
    "DEFAULT_URL",
    "ShardplanError",
    "ShardplanConnectionError",
    "mesh_from_jax",
    "spec_from_partition_spec",
    "from_named_sharding",
    "mesh_from_device_mesh",
    "sharding_from_placements",
    "from_dtensor",
    "to_partition_spec_string",
    "dtype_name",
    "placements_json",
    "request_fields",
    "partition_spec_entries",
    "to_partition_spec",
    "to_named_sharding",
    "to_placement_strings",
    "to_placements",
]
