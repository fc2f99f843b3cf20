#!/usr/bin/env python3
"""Write tests/onnx/io_names.onnx, the model tests/test_tools.sh runs
teeny-run and teeny-info on for their input and output listings and for
output names that are not file names.

Two inputs, "img" float [batch, 3, 4, 4] and "meta" float [batch, 5]
(batch a named symbolic dimension); two outputs, "/l2/probs:0" =
Relu(img) (legal in ONNX, not a file name) and "_l2_probs_0" =
Sigmoid(meta) (the file name the first one maps to). Opset 13.

Python's standard library only (it writes the protobuf wire format
itself), so it runs anywhere; make test never runs it, the .onnx is
committed:  python3 tests/onnx/make_io_model.py"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited field (wire type 2): bytes, a string or a message."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def int_field(num, value):
    return varint(num << 3) + varint(value)


def value_info(name, elem_type, dims):
    # TensorShapeProto.Dimension: dim_value = 1, dim_param = 2
    shape = b"".join(field(1, int_field(1, d) if isinstance(d, int) else field(2, d)) for d in dims)
    tensor = int_field(1, elem_type) + field(2, shape)  # TypeProto.Tensor: elem_type, shape
    return field(1, name) + field(2, field(1, tensor))  # ValueInfoProto: name, type (TypeProto.tensor_type)


def node(op, inputs, outputs, name):
    return b"".join(field(1, i) for i in inputs) + b"".join(field(2, o) for o in outputs) + \
        field(3, name) + field(4, op)


FLOAT = 1
graph = (field(1, node("Relu", ["img"], ["/l2/probs:0"], "relu")) +
         field(1, node("Sigmoid", ["meta"], ["_l2_probs_0"], "sigmoid")) +
         field(2, "io_names") +
         field(11, value_info("img", FLOAT, ["batch", 3, 4, 4])) +
         field(11, value_info("meta", FLOAT, ["batch", 5])) +
         field(12, value_info("/l2/probs:0", FLOAT, ["batch", 3, 4, 4])) +
         field(12, value_info("_l2_probs_0", FLOAT, ["batch", 5])))
# ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 (OperatorSetIdProto: domain 1, version 2)
model = int_field(1, 8) + field(2, "make_io_model.py") + field(7, graph) + field(8, field(1, "") + int_field(2, 13))
path = os.path.join(HERE, "io_names.onnx")
with open(path, "wb") as f:
    f.write(model)
print("io_names: %d bytes" % len(model))
