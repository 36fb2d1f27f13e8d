"""Stand-ins named like the JAX and PyTorch classes the converters read, so the tests need
neither framework. They carry only the attributes the converters use."""



class FakeArray:
    """A tiny row-major n-d array: ``.shape``, ``.flat`` (like numpy) and ``.flatten()``,
    ``.tolist()`` (like torch)."""

    def __init__(self, items, shape):
        n = 1
        for s in shape:
            n *= s
        assert len(items) == n, (len(items), shape)
        self._items = list(items)
        self.shape = tuple(shape)

    @property
    def flat(self):
        return iter(self._items)

    def flatten(self):
        return FakeArray(self._items, (len(self._items),))

    def tolist(self):
        def build(items, shape):
            if len(shape) <= 1:
                return list(items)
            step = len(items) // shape[0]
            return [build(items[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]

        return build(self._items, self.shape)


class Device:
    def __init__(self, id):
        self.id = id

    def __repr__(self):
        return "Device(id=%d)" % self.id


class Mesh:
    """jax.sharding.Mesh: ``devices`` (an ndarray of Device) and ``axis_names``."""

    def __init__(self, devices, axis_names):
        self.devices = devices
        self.axis_names = tuple(axis_names)

    @property
    def shape(self):
        return dict(zip(self.axis_names, self.devices.shape))


class AbstractMesh:
    """jax.sharding.AbstractMesh: no devices, ``shape`` maps name -> size."""

    def __init__(self, sizes, names):
        self.axis_names = tuple(names)
        self.axis_sizes = tuple(sizes)

    @property
    def shape(self):
        return dict(zip(self.axis_names, self.axis_sizes))


class UnconstrainedSingleton:
    def __repr__(self):
        return "UNCONSTRAINED"


class PartitionSpec(tuple):
    """jax.sharding.PartitionSpec (older JAX: a tuple subclass), with ``UNCONSTRAINED`` and
    the newer ``unreduced`` set."""

    UNCONSTRAINED = UnconstrainedSingleton()

    def __new__(cls, *partitions, unreduced=frozenset()):
        self = super().__new__(cls, partitions)
        self.unreduced = frozenset(unreduced)
        return self


P = PartitionSpec


class NamedSharding:
    def __init__(self, mesh, spec):
        self.mesh = mesh
        self.spec = spec


def jax_mesh(shape, names, ids=None):
    n = 1
    for s in shape:
        n *= s
    ids = list(range(n)) if ids is None else ids
    return Mesh(FakeArray([Device(i) for i in ids], shape), names)


class Tensor(FakeArray):
    """A torch tensor of ranks (DeviceMesh.mesh)."""


class DeviceMesh:
    """torch.distributed.device_mesh.DeviceMesh: ``mesh`` (a tensor of ranks) and
    ``mesh_dim_names``."""

    def __init__(self, device_type, mesh, mesh_dim_names=None):
        self.device_type = device_type
        self.mesh = mesh
        self.mesh_dim_names = tuple(mesh_dim_names) if mesh_dim_names is not None else None

    @property
    def shape(self):
        return tuple(self.mesh.shape)

    @property
    def ndim(self):
        return len(self.mesh.shape)


def device_mesh(shape, names, ranks=None):
    n = 1
    for s in shape:
        n *= s
    ranks = list(range(n)) if ranks is None else ranks
    return DeviceMesh("cuda", Tensor(ranks, shape), names)


class Placement:
    pass


class Shard(Placement):
    def __init__(self, dim):
        self.dim = dim

    def __repr__(self):
        return "Shard(dim=%d)" % self.dim


class _StridedShard(Shard):
    def __init__(self, dim, split_factor):
        super().__init__(dim)
        self.split_factor = split_factor


class Replicate(Placement):
    def __repr__(self):
        return "Replicate()"


class Partial(Placement):
    def __init__(self, reduce_op="sum"):
        self.reduce_op = reduce_op

    def __repr__(self):
        return "Partial(%s)" % self.reduce_op


class DTensor:
    def __init__(self, device_mesh, placements, shape):
        self.device_mesh = device_mesh
        self.placements = tuple(placements)
        self.shape = tuple(shape)
        self.ndim = len(shape)


