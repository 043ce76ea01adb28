"""Building a kgraph protobuf (compiler/graph/kgraph.proto) from Python.

Values are numbered as the format requires: inputs first, then every node
result in node order. The writer knows each value's dtype and shape, so the
converter can insert the casts and broadcasts kgraph's stricter ops need.
"""


import torch

from . import kgraph_pb2 as pb

GRAPH_FORMAT_VERSION = 1

_DTYPES = {
    torch.float32: pb.F32,
    torch.bfloat16: pb.BF16,
    torch.float16: pb.F16,
    torch.int32: pb.I32,
    torch.int64: pb.I64,
    torch.bool: pb.I1,
}
TORCH_DTYPES = {v: k for k, v in _DTYPES.items()}


def kgraph_dtype(dtype):
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise TypeError(f"kgraph has no dtype for {dtype}; use float32, "
                        "bfloat16, float16, int32, int64 or bool") from None


class Value:
    """One kgraph value: its number, torch dtype and shape."""

    __slots__ = ("id", "dtype", "shape")

    def __init__(self, id, dtype, shape):
        self.id = id
        self.dtype = dtype
        self.shape = tuple(int(d) for d in shape)

    @property
    def rank(self):
        return len(self.shape)

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        return f"Value(%{self.id}: {self.dtype} {list(self.shape)})"


def tensor_type(dtype, shape):
    return pb.TensorType(dtype=kgraph_dtype(dtype), shape=list(shape))


def tensor_data(tensor):
    """A TensorData holding `tensor`'s bytes, little-endian, row-major."""
    t = tensor.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        raw = t.view(torch.int16).numpy().tobytes()
    elif t.dtype == torch.bool:
        raw = t.to(torch.uint8).numpy().tobytes()
    else:
        raw = t.numpy().tobytes()
    return pb.TensorData(type=tensor_type(t.dtype, t.shape), raw=raw)


def _attribute(value):
    if isinstance(value, bool):
        return pb.Attribute(b=value)
    if isinstance(value, int):
        return pb.Attribute(i=value)
    if isinstance(value, float):
        return pb.Attribute(f=value)
    if isinstance(value, str):
        return pb.Attribute(s=value)
    if isinstance(value, torch.Tensor):
        return pb.Attribute(tensor=tensor_data(value))
    if isinstance(value, (list, tuple)):
        return pb.Attribute(ints=pb.IntList(values=[int(v) for v in value]))
    raise TypeError(f"no kgraph attribute for {value!r}")


class GraphWriter:
    def __init__(self, name):
        self.graph = pb.Graph(format_version=GRAPH_FORMAT_VERSION, name=name)
        self.count = 0
        self.location = None  # (file, line, function) for the next nodes

    def input(self, name, dtype, shape, role):
        if self.graph.nodes:
            raise AssertionError("inputs must come before nodes")
        self.graph.inputs.add(name=name, type=tensor_type(dtype, shape),
                              role=role)
        value = Value(self.count, dtype, shape)
        self.count += 1
        return value

    def node(self, op, operands, results, **attributes):
        """Appends `op`; `results` is a list of (dtype, shape)."""
        node = self.graph.nodes.add(op=op, operands=[v.id for v in operands])
        for dtype, shape in results:
            node.results.append(tensor_type(dtype, shape))
        for name in sorted(attributes):
            if attributes[name] is not None:
                node.attributes.add(name=name, value=_attribute(attributes[name]))
        if self.location:
            file, line, function = self.location
            node.location.file = file
            node.location.line = line
            node.location.function = function
        values = []
        for dtype, shape in results:
            values.append(Value(self.count, dtype, shape))
            self.count += 1
        return values

    def one(self, op, operands, dtype, shape, **attributes):
        return self.node(op, operands, [(dtype, shape)], **attributes)[0]

    def constant(self, tensor):
        return self.one("constant", [], tensor.dtype, tensor.shape,
                        value=tensor)

    def output(self, name, value, role, aliases_input=-1):
        self.graph.outputs.add(name=name, value=value.id, role=role,
                               aliases_input=aliases_input)

    def serialize(self):
        return self.graph.SerializeToString(deterministic=True)
