#!/usr/bin/env python3
"""Write the small ONNX models tests/test_onnx.c imports, with their inputs
and the outputs onnxruntime computes for them (.npy), into this directory.

Run by hand when the set changes (needs onnx, onnxruntime and numpy from
PyPI; make test never runs it):  python3 tests/onnx/make_models.py
Every model covers some of the ops the importer maps; together they cover
all of them. Weights and inputs come from a seeded generator, so reruns
write the same bytes (for a given onnx version)."""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(18)


def w(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def save(name, graph, opset, inputs, external=False, ir_version=8, check=True):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_models.py")
    model.ir_version = ir_version
    if check:  # onnx >= 1.16's checker refuses GroupNormalization-18 (deprecated); onnxruntime runs it
        onnx.checker.check_model(model)
    path = os.path.join(HERE, name + ".onnx")
    if external:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=name + ".bin", size_threshold=0)
    else:
        onnx.save_model(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: v for i, v in zip(sess.get_inputs(), inputs)}
    outs = sess.run(None, feeds)
    for k, v in enumerate(inputs):
        np.save(os.path.join(HERE, "%s.in%d.npy" % (name, k)), v)  # int64 stays int64 (teeny_npy_read takes it)
    for k, v in enumerate(outs):  # float16 outputs stay float16 ('<f2', what teeny-run writes for them)
        v = np.asarray(v)
        np.save(os.path.join(HERE, "%s.out%d.npy" % (name, k)), v if v.dtype == np.float16 else v.astype(np.float32))
    print("%s: %d bytes, %d nodes, outputs %s" % (name, os.path.getsize(path), len(graph.node),
                                                  [tuple(np.shape(o)) for o in outs]))


def shape_checks():
    """The shape checks nn.MultiheadAttention and timm export (issue 42),
    folded at import: Shape -> Gather -> Mod -> Equal -> Where choosing a
    Reshape target; Range -> Cast added to x; Size; Less, Greater, Not,
    And, Or, Xor, LessOrEqual, GreaterOrEqual into an If whose then_branch
    is a Relu of x (its else_branch holds Neg, which the importer lacks:
    never read); Where whose constant condition picks x everywhere."""
    n = helper.make_node
    f = TensorProto.FLOAT
    then_g = helper.make_graph([n("Relu", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", f, ["N", 4, 6])])
    else_g = helper.make_graph([n("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", f, ["N", 4, 6])])
    nodes = [
        n("Shape", ["x"], ["shp"]),
        n("Gather", ["shp", "zero"], ["batch"], axis=0),
        n("Gather", ["shp", "two"], ["width"], axis=0),
        n("Mod", ["width", "two"], ["rem"]),
        n("Equal", ["rem", "zero"], ["even"]),
        n("Unsqueeze", ["batch", "ax0"], ["batch1"]),
        n("Concat", ["batch1", "split_dims"], ["split"], axis=0),
        n("Concat", ["batch1", "flat_dims"], ["flat"], axis=0),
        n("Where", ["even", "split", "flat"], ["target"]),
        n("Reshape", ["x", "target"], ["y_split"]),
        n("Range", ["zero", "width", "one"], ["pos"]),
        n("Cast", ["pos"], ["pos_f"], to=f),
        n("Add", ["x", "pos_f"], ["y_pos"]),
        n("Size", ["x"], ["numel"]),
        n("Cast", ["numel"], ["numel_f"], to=f),
        n("Div", ["x", "numel_f"], ["y_scaled"]),
        n("Less", ["batch", "big"], ["c1"]),
        n("Greater", ["width", "big"], ["c2"]),
        n("Not", ["c2"], ["c3"]),
        n("And", ["c1", "c3"], ["c4"]),
        n("LessOrEqual", ["batch", "batch"], ["c5"]),
        n("GreaterOrEqual", ["zero", "width"], ["c6"]),
        n("Xor", ["c5", "c6"], ["c7"]),
        n("Or", ["c4", "c7"], ["c8"]),
        n("If", ["c8"], ["y_if"], then_branch=then_g, else_branch=else_g),
        n("Where", ["even", "x", "nan"], ["y_where"]),
    ]
    inits = [init("zero", np.array(0, np.int64)), init("one", np.array(1, np.int64)),
             init("two", np.array(2, np.int64)), init("big", np.array(100, np.int64)),
             init("ax0", np.array([0], np.int64)), init("split_dims", np.array([4, 2, 3], np.int64)),
             init("flat_dims", np.array([24, 1, 1], np.int64)), init("nan", np.array([np.nan], np.float32))]
    outs = [helper.make_tensor_value_info("y_split", f, ["N", 4, 2, 3])] + \
        [helper.make_tensor_value_info(name, f, ["N", 4, 6]) for name in ("y_pos", "y_scaled", "y_if", "y_where")]
    g = helper.make_graph(nodes, "shape_checks", [helper.make_tensor_value_info("x", f, ["N", 4, 6])], outs, inits)
    save("shape_checks", g, 17, [w(2, 4, 6, scale=1.0)])


def convnet():
    """Conv (padded, grouped, strided), BatchNormalization, Relu, MaxPool,
    x * Sigmoid(x), AveragePool (count_include_pad), Concat on channels,
    GlobalAveragePool, Flatten, Gemm; PyTorch-style initializer names."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"], ["b1"],
          name="bn1", epsilon=1e-5, momentum=0.9),
        n("Relu", ["b1"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", kernel_shape=[3, 3], group=2,
          strides=[2, 2], pads=[1, 1, 1, 1]),
        n("Sigmoid", ["c2"], ["s2"]),
        n("Mul", ["c2", "s2"], ["a2"]),
        n("AveragePool", ["p1"], ["q1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
          count_include_pad=1),
        n("Concat", ["a2", "q1"], ["cat"], axis=1),
        n("GlobalAveragePool", ["cat"], ["g"]),
        n("Flatten", ["g"], ["f"], axis=1),
        n("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1),
    ]
    inits = [init("conv1.weight", w(4, 3, 3, 3)), init("conv1.bias", w(4)),
             init("bn1.weight", 1 + w(4, scale=0.1)), init("bn1.bias", w(4, scale=0.1)),
             init("bn1.running_mean", w(4, scale=0.1)), init("bn1.running_var", 1 + np.abs(w(4, scale=0.2))),
             init("conv2.weight", w(6, 2, 3, 3)), init("conv2.bias", w(6)),
             init("fc.weight", w(5, 10)), init("fc.bias", w(5))]
    g = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])], inits)
    save("convnet", g, 17, [w(2, 3, 8, 8, scale=1.0)])


def shapes():
    """The exporter's dynamic-batch arithmetic: Shape -> Gather -> Unsqueeze
    -> Concat -> Reshape, with Cast, Slice, Sub, Div, Mul, Add of constants,
    ConstantOfShape, Constant, Identity, Dropout, Squeeze/Unsqueeze views,
    MatMul with a constant weight, Sum and Add of run-time values."""
    n = helper.make_node
    i64 = lambda name, vals: helper.make_tensor(name, TensorProto.INT64, [len(vals)], vals)
    nodes = [
        n("Shape", ["x"], ["shp"]),
        n("Constant", [], ["zero"], value=helper.make_tensor("zero", TensorProto.INT64, [], [0])),
        n("Gather", ["shp", "zero"], ["batch"], axis=0),
        n("Unsqueeze", ["batch", "ax0"], ["batch1"]),
        n("Slice", ["shp", "s_start", "s_end"], ["chw"]),
        n("Cast", ["chw"], ["chw_f"], to=TensorProto.FLOAT),
        n("Cast", ["chw_f"], ["chw_i"], to=TensorProto.INT64),
        n("Constant", [], ["one"], value=i64("one", [1])),
        n("Mul", ["chw_i", "one"], ["chw2"]),
        n("Sub", ["chw2", "one"], ["chw_m1"]),
        n("Add", ["chw_m1", "one"], ["chw3"]),
        n("Div", ["chw3", "one"], ["chw4"]),
        n("Identity", ["c36"], ["feat"]),
        n("Concat", ["batch1", "feat"], ["target"], axis=0),
        n("Reshape", ["x", "target"], ["flat"]),
        n("Dropout", ["flat"], ["drop"]),
        n("Identity", ["drop"], ["ident"]),
        n("MatMul", ["ident", "proj"], ["y0"]),
        n("Unsqueeze", ["y0", "ax2"], ["y1"]),
        n("Squeeze", ["y1", "ax2"], ["y2"]),
        n("Sum", ["y0", "y2", "y0"], ["y3"]),
        n("Add", ["y3", "y2"], ["y"]),
        n("ConstantOfShape", ["chw4"], ["ones"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])),
        n("Shape", ["ones"], ["ones_shape"]),
    ]
    inits = [init("ax0", np.array([0], np.int64)), init("ax2", np.array([2], np.int64)),
             init("s_start", np.array([1], np.int64)), init("s_end", np.array([4], np.int64)),
             init("c36", np.array([36], np.int64)), init("proj", w(36, 7))]
    g = helper.make_graph(nodes, "shapes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 7]),
                           helper.make_tensor_value_info("ones_shape", TensorProto.INT64, [3])], inits)
    save("shapes", g, 17, [w(3, 4, 3, 3, scale=1.0)])


def conv1d():
    """1-D Conv, MaxPool, AveragePool (auto_pad SAME_UPPER), BatchNormalization
    on [N, C, L], Mul of run-time values; opset 11 (Unsqueeze/Squeeze axes
    attributes, Dropout's ratio attribute)."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1"], ["c"], kernel_shape=[3], pads=[1, 1], dilations=[2], strides=[1]),
        n("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
        n("MaxPool", ["bn"], ["mp"], kernel_shape=[2], strides=[2]),
        n("AveragePool", ["bn"], ["ap"], kernel_shape=[2], strides=[2], auto_pad="SAME_UPPER",
          count_include_pad=1),
        n("Dropout", ["ap"], ["ap2"], ratio=0.25),
        n("Mul", ["mp", "ap2"], ["prod"]),
        n("Unsqueeze", ["prod"], ["u"], axes=[3]),
        n("Squeeze", ["u"], ["y"], axes=[3]),
    ]
    inits = [init("w1", w(4, 2, 3)), init("s", 1 + w(4, scale=0.1)), init("b", w(4, scale=0.1)),
             init("m", w(4, scale=0.1)), init("v", 1 + np.abs(w(4, scale=0.2)))]
    g = helper.make_graph(nodes, "conv1d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 4])], inits)
    save("conv1d", g, 11, [w(2, 2, 10, scale=1.0)])


def sce():
    """SoftmaxCrossEntropyLoss (mean) on [N, C] scores and int64 labels."""
    n = helper.make_node
    nodes = [n("Gemm", ["x", "w", "b"], ["scores"], transB=0),
             n("SoftmaxCrossEntropyLoss", ["scores", "labels"], ["loss"])]
    g = helper.make_graph(nodes, "sce", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6]),
                                         helper.make_tensor_value_info("labels", TensorProto.INT64, ["N"])],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                          [init("w", w(6, 4)), init("b", w(1))])
    save("sce", g, 13, [w(5, 6, scale=1.0), np.array([0, 3, 1, 2, 3], np.int64)])


def sce_options():
    """SoftmaxCrossEntropyLoss with constant class weights, ignore_index -1 and
    reduction none (with log_prob), and sum without weights (labels outside
    [0, C) other than ignore_index are undefined in ONNX: none here)."""
    n = helper.make_node
    nodes = [n("Gemm", ["x", "w", "b"], ["scores"], transB=0),
             n("SoftmaxCrossEntropyLoss", ["scores", "labels", "cw"], ["rows", "log_prob"], reduction="none",
               ignore_index=-1),
             n("SoftmaxCrossEntropyLoss", ["scores", "labels"], ["total"], reduction="sum", ignore_index=-1)]
    g = helper.make_graph(nodes, "sce_options", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6]),
                                                 helper.make_tensor_value_info("labels", TensorProto.INT64, ["N"])],
                          [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["N"]),
                           helper.make_tensor_value_info("log_prob", TensorProto.FLOAT, ["N", 4]),
                           helper.make_tensor_value_info("total", TensorProto.FLOAT, [])],
                          [init("w", w(6, 4)), init("b", w(1)), init("cw", 0.5 + np.abs(w(4)))])
    save("sce_options", g, 13, [w(6, 6, scale=1.0), np.array([0, 3, 1, -1, 2, 3], np.int64)])


def sce_nd():
    """SoftmaxCrossEntropyLoss over scores [N, C, d] with labels [N, d]:
    run-time class weights, ignore_index 0 and mean; none with log_prob."""
    n = helper.make_node
    nodes = [n("SoftmaxCrossEntropyLoss", ["x", "labels", "cw"], ["loss"], ignore_index=0),
             n("SoftmaxCrossEntropyLoss", ["x", "labels"], ["rows", "log_prob"], reduction="none")]
    g = helper.make_graph(nodes, "sce_nd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4]),
                                            helper.make_tensor_value_info("labels", TensorProto.INT64, ["N", 4]),
                                            helper.make_tensor_value_info("cw", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["N", 4]),
                           helper.make_tensor_value_info("log_prob", TensorProto.FLOAT, ["N", 3, 4])])
    save("sce_nd", g, 13, [w(2, 3, 4, scale=1.0), np.array([[0, 2, 1, 0], [1, 1, 2, 0]], np.int64),
                           0.5 + np.abs(w(3))])


def sce_unsupported():
    """SoftmaxCrossEntropyLoss with a reduction teenycl has not: refused,
    naming node, op and attribute."""
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "labels"], ["loss"], name="ce_max", reduction="max")
    g = helper.make_graph([node], "bad_sce_reduction", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                          helper.make_tensor_value_info("labels", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save_model(model, os.path.join(HERE, "bad_sce_reduction.onnx"))


def external():
    """A conv whose weights sit in an external data file beside the model."""
    n = helper.make_node
    g = helper.make_graph([n("Conv", ["x", "ext.weight", "ext.bias"], ["y"], kernel_shape=[3, 3])], "external",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 3, 3])],
                          [init("ext.weight", w(3, 2, 3, 3)), init("ext.bias", w(3))])
    save("external", g, 17, [w(1, 2, 5, 5, scale=1.0)], external=True)


def pools():
    """Group B's pooling options: MaxPool with pads begin != end, dilations,
    ceil_mode and its Indices output (storage_order 1), AveragePool with
    count_include_pad=0 over pads past half the kernel and auto_pad
    SAME_LOWER, GlobalMaxPool."""
    n = helper.make_node
    nodes = [
        n("MaxPool", ["x"], ["mp", "idx"], kernel_shape=[3, 2], strides=[2, 1], pads=[2, 0, 1, 1], dilations=[1, 2],
          ceil_mode=1, storage_order=1),
        n("AveragePool", ["x"], ["ap"], kernel_shape=[2, 3], strides=[1, 2], pads=[1, 2, 0, 2]),
        n("AveragePool", ["x"], ["same"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_LOWER"),
        n("GlobalMaxPool", ["mp"], ["gmp"]),
    ]
    g = helper.make_graph(nodes, "pools", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 7, 6])],
                          [helper.make_tensor_value_info("mp", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("idx", TensorProto.INT64, []),
                           helper.make_tensor_value_info("ap", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("same", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("gmp", TensorProto.FLOAT, [])])
    save("pools", g, 19, [w(2, 3, 7, 6, scale=1.0)])


def convt():
    """ConvTranspose: groups, strides, dilations, pads begin != end,
    output_padding and a bias; auto_pad SAME_LOWER (an odd total padding:
    its odd unit before); output_shape (ONNX's split of the padding it
    implies); 1-D with output_padding ([L, 1] inside)."""
    n = helper.make_node
    nodes = [
        n("ConvTranspose", ["x", "w1", "b1"], ["g"], group=2, strides=[2, 1], dilations=[1, 2], pads=[1, 0, 0, 2],
          output_padding=[1, 0]),
        n("ConvTranspose", ["x", "w2"], ["same"], auto_pad="SAME_LOWER", strides=[2, 1]),
        n("ConvTranspose", ["x", "w3"], ["os"], strides=[2, 2], output_shape=[10, 7]),
        n("ConvTranspose", ["x1", "w4", "b4"], ["c1"], strides=[3], pads=[1, 0], output_padding=[2]),
    ]
    inits = [init("w1", w(4, 3, 3, 2)), init("b1", w(6)), init("w2", w(4, 2, 3, 2)), init("w3", w(4, 2, 3, 3)),
             init("w4", w(2, 3, 2)), init("b4", w(3))]
    g = helper.make_graph(nodes, "convt", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 5, 4]),
                                           helper.make_tensor_value_info("x1", TensorProto.FLOAT, ["N", 2, 6])],
                          [helper.make_tensor_value_info(k, TensorProto.FLOAT, []) for k in ("g", "same", "os", "c1")],
                          inits)
    save("convt", g, 17, [w(2, 4, 5, 4, scale=1.0), w(2, 2, 6, scale=1.0)])


def gemm():
    """Gemm beyond the linear layer: transA on a run-time A with a constant
    B (transB=1), alpha and beta with C of [M, N]; a run-time B (transB=1)
    with C of [M, 1]; C [M, N] with alpha = beta = 1 (a linear node and an
    add); a run-time C (another Gemm's output) with beta; beta=0."""
    n = helper.make_node
    f = TensorProto.FLOAT
    nodes = [n("Gemm", ["xt", "w1", "c1"], ["y1"], transA=1, transB=1, alpha=0.7, beta=-1.3),
             n("Gemm", ["x", "b", "c2"], ["y2"], transB=1, alpha=1.5, beta=0.5),
             n("Gemm", ["x", "w3", "c3"], ["y3"]),
             n("Gemm", ["x", "w4", "y1"], ["y4"], alpha=-2.0, beta=2.0),
             n("Gemm", ["xt", "b", "c3"], ["y5"], transA=1, transB=1, beta=0.0)]
    g = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", f, [3, 5]),
                                          helper.make_tensor_value_info("xt", f, [5, 3]),
                                          helper.make_tensor_value_info("b", f, [4, 5])],
                          [helper.make_tensor_value_info("y%d" % k, f, [3, 4]) for k in range(1, 6)],
                          [init("w1", w(4, 5)), init("c1", w(3, 4)), init("c2", w(3, 1)), init("w3", w(5, 4)),
                           init("c3", w(3, 4)), init("w4", w(5, 4))])
    save("gemm", g, 13, [w(3, 5, scale=1.0), w(5, 3, scale=1.0), w(4, 5, scale=1.0)])


def resize():
    """Resize at opset 19 (scales and sizes constant; nearest with each
    rounding and coordinate mode, linear; axes [2, 3]) and Upsample at
    opset 9 (nearest and linear: asymmetric); and the refusals: cubic,
    a scale on the channels, scales computed at run time."""
    n = helper.make_node
    f = TensorProto.FLOAT
    c = lambda name, v, t=np.float32: init(name, np.array(v, t))
    nodes = [n("Resize", ["x", "", "s1"], ["r1"], mode="nearest", coordinate_transformation_mode="asymmetric",
               nearest_mode="floor"),
             n("Resize", ["x", "", "", "z2"], ["r2"], mode="linear"),
             n("Resize", ["x", "", "", "z3"], ["r3"], mode="nearest",
               coordinate_transformation_mode="pytorch_half_pixel", nearest_mode="round_prefer_ceil"),
             n("Resize", ["x", "", "s4"], ["r4"], mode="linear", coordinate_transformation_mode="align_corners"),
             n("Resize", ["x", "", "", "z5"], ["r5"], mode="nearest",
               coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode="ceil"),
             n("Resize", ["x", "", "s6"], ["r6"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel",
               axes=[2, 3])]
    inits = [c("s1", [1, 1, 2, 1.5]), c("z2", [2, 3, 7, 3], np.int64), c("z3", [2, 3, 3, 8], np.int64),
             c("s4", [1, 1, 0.5, 0.8]), c("z5", [2, 3, 9, 4], np.int64), c("s6", [2.5, 0.6])]
    g = helper.make_graph(nodes, "resize", [helper.make_tensor_value_info("x", f, [2, 3, 4, 5])],
                          [helper.make_tensor_value_info("r%d" % (k + 1), f, [2, 3, h, w_])
                           for k, (h, w_) in enumerate([(8, 7), (7, 3), (3, 8), (2, 4), (9, 4), (10, 3)])], inits)
    save("resize", g, 19, [w(2, 3, 4, 5, scale=1.0)])
    nodes = [n("Upsample", ["x", "s"], ["u1"], mode="nearest"), n("Upsample", ["x", "s"], ["u2"], mode="linear")]
    g = helper.make_graph(nodes, "upsample", [helper.make_tensor_value_info("x", f, [2, 3, 4, 5])],
                          [helper.make_tensor_value_info("u%d" % k, f, [2, 3, 8, 15]) for k in (1, 2)],
                          [c("s", [1, 1, 2, 3])])
    save("upsample", g, 9, [w(2, 3, 4, 5, scale=1.0)])
    x = [helper.make_tensor_value_info("x", f, [1, 2, 6, 6])]
    y = [helper.make_tensor_value_info("y", f, None)]
    for name, node, inits, extra in [
            ("bad_resize", n("Resize", ["x", "", "s"], ["y"], name="up_cubic", mode="cubic"),
             [c("s", [1, 1, 2, 2])], []),
            ("bad_resize_axes", n("Resize", ["x", "", "s"], ["y"], name="up_c"), [c("s", [1, 2, 1, 1])], []),
            ("bad_resize_input", n("Resize", ["x", "", "s"], ["y"], name="up_rt"), [],
             [helper.make_tensor_value_info("s", f, [4])])]:
        model = helper.make_model(helper.make_graph([node], name, x + extra, y, inits),
                                  opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        onnx.save_model(model, os.path.join(HERE, name + ".onnx"))
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(HERE, name + ".onnx"))))


def unsupported():
    """Models the importer must refuse, naming the node, op and attribute."""
    n = helper.make_node
    x = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])]
    y = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    bn = [init(k, np.ones(2, np.float32)) for k in ("s", "b", "m", "v")]
    for name, node, opset, inits in [
            ("bad_op", n("Softplus", ["x"], ["y"], name="my_softplus"), 17, []),
            ("bad_attr", n("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn_s", spatial=0), 8, bn)]:
        model = helper.make_model(helper.make_graph([node], name, x, y, inits),
                                  opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.save_model(model, os.path.join(HERE, name + ".onnx"))
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(HERE, name + ".onnx"))))


def convt_unsupported():
    """ConvTranspose attribute values the importer must refuse, naming the
    node, the op and the attribute: SAME_UPPER whose padding would start
    before the output (a negative total: ONNX's split puts its odd unit
    before), output_shape disagreeing with explicit pads, a 3-D kernel."""
    n = helper.make_node
    w2 = init("w", np.ones((2, 1, 1, 1), np.float32))
    w3 = init("w", np.ones((2, 1, 1, 1, 1), np.float32))
    cases = [
        ("bad_convt_same", n("ConvTranspose", ["x", "w"], ["y"], name="up_same", auto_pad="SAME_UPPER",
                             strides=[2, 2]), [1, 2, 3, 3], w2),
        ("bad_convt_shape", n("ConvTranspose", ["x", "w"], ["y"], name="up_shape", pads=[0, 0, 0, 0],
                              output_shape=[4, 3]), [1, 2, 3, 3], w2),
        ("bad_convt_3d", n("ConvTranspose", ["x", "w"], ["y"], name="up_3d"), [1, 2, 3, 3, 3], w3),
    ]
    for name, node, xshape, wi in cases:
        x = [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape)]
        y = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
        model = helper.make_model(helper.make_graph([node], name, x, y, [wi]),
                                  opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save_model(model, os.path.join(HERE, name + ".onnx"))
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(HERE, name + ".onnx"))))


def attention():
    """ONNX Attention (opset 23): "gqa", 4-D grouped-query with no mask (the
    fused kernel, queries folded per key/value head); "dec", 3-D with
    q/kv_num_heads, past_key/past_value and present outputs, is_causal, a
    run-time float mask with a -inf, softcap
    and qk_matmul_output_mode 1 (onnxruntime writes its causal mask as
    -FLT_MAX where onnx's reference and teenycl write -inf, so mode 2's
    masked scores differ by design: check-onnx covers mode 2); "bmask", a constant bool mask broadcast
    over heads, with a custom scale and V's head size differing."""
    global rng
    rng = np.random.default_rng(23)
    n = helper.make_node
    f = TensorProto.FLOAT
    bmask = np.ones((2, 1, 3, 6), bool)
    bmask[0, 0, :, 4:] = False
    bmask[1, 0, 1, 0] = False
    nodes = [
        n("Attention", ["q4", "k4", "v4"], ["y_gqa"], name="gqa"),
        n("Attention", ["q3", "k3", "v3", "mask", "past_k", "past_v"], ["y_dec", "present_k", "present_v", "qk"],
          name="dec", q_num_heads=4, kv_num_heads=2, is_causal=1, softcap=2.5, qk_matmul_output_mode=1),
        n("Attention", ["q4", "k4b", "v4b", "bmask"], ["y_bmask"], name="bmask", scale=0.2),
    ]
    vi = helper.make_tensor_value_info
    ins = [vi("q4", f, [2, 6, 3, 8]), vi("k4", f, [2, 3, 5, 8]), vi("v4", f, [2, 3, 5, 8]),
           vi("q3", f, [2, 3, 16]), vi("k3", f, [2, 3, 8]), vi("v3", f, [2, 3, 8]), vi("mask", f, [3, 5]),
           vi("past_k", f, [2, 2, 2, 4]), vi("past_v", f, [2, 2, 2, 4]),
           vi("k4b", f, [2, 6, 6, 8]), vi("v4b", f, [2, 6, 6, 5])]
    outs = [vi(o, f, s) for o, s in [("y_gqa", [2, 6, 3, 8]), ("y_dec", [2, 3, 16]), ("present_k", [2, 2, 5, 4]),
                                      ("present_v", [2, 2, 5, 4]), ("qk", [2, 4, 3, 5]), ("y_bmask", [2, 6, 3, 5])]]
    g = helper.make_graph(nodes, "attention", ins, outs, [init("bmask", bmask)])
    mask = w(3, 5, scale=1.0)
    mask[2, 1] = -np.inf
    save("attention", g, 23, [w(2, 6, 3, 8, scale=1.0), w(2, 3, 5, 8, scale=1.0), w(2, 3, 5, 8, scale=1.0),
                              w(2, 3, 16, scale=1.0), w(2, 3, 8, scale=1.0), w(2, 3, 8, scale=1.0), mask,
                              w(2, 2, 2, 4, scale=1.0), w(2, 2, 2, 4, scale=1.0),
                              w(2, 6, 6, 8, scale=1.0), w(2, 6, 6, 5, scale=1.0)])


def scalar_feed():
    """A rank-0 graph input (ONNX's test_gemm_default_scalar_bias and
    test_pow_bcast_scalar have them): y = Gemm(a, b, c) with c a scalar
    bias, z = Pow(x, e) with e a scalar exponent. teeny-run feeds c and e
    from 0-d .npy files (tests/test_tools.sh)."""
    n = helper.make_node
    vi = helper.make_tensor_value_info
    f = TensorProto.FLOAT
    nodes = [n("Gemm", ["a", "b", "c"], ["y"], name="gemm"), n("Pow", ["x", "e"], ["z"], name="pow")]
    g = helper.make_graph(nodes, "scalar_feed", [vi("a", f, [2, 3]), vi("b", f, [3, 4]), vi("c", f, []),
                                                 vi("x", f, [3]), vi("e", f, [])],
                          [vi("y", f, [2, 4]), vi("z", f, [3])])
    save("scalar_feed", g, 13, [w(2, 3), w(3, 4), np.array(0.25, np.float32), np.array([1.5, 2.0, 3.0], np.float32),
                                np.array(2.0, np.float32)])


def slice_feed():
    """An int64 operand given at run: Slice's ends from a graph input, which
    the importer takes from its feed as a constant (INT64_MAX, past int32,
    means "to the end"; teeny-run reads it from a '<i8' .npy whole)."""
    n = helper.make_node
    vi = helper.make_tensor_value_info
    nodes = [n("Slice", ["x", "starts", "ends", "axes"], ["y"], name="slice")]
    g = helper.make_graph(nodes, "slice_feed", [vi("x", TensorProto.FLOAT, [2, 5]), vi("ends", TensorProto.INT64, [1])],
                          [vi("y", TensorProto.FLOAT, [2, 4])],
                          [init("starts", np.array([1], np.int64)), init("axes", np.array([1], np.int64))])
    save("slice_feed", g, 13, [w(2, 5), np.array([np.iinfo(np.int64).max], np.int64)])


def attention_unsupported():
    """Attention values the importer must refuse, naming node, op and
    attribute: softmax_precision float16 (teenycl's softmax is fp32), a
    bool mask only known at run time."""
    n = helper.make_node
    vi = helper.make_tensor_value_info
    f = TensorProto.FLOAT
    qkv = [vi(x, f, [1, 2, 3, 4]) for x in ("q", "k", "v")]
    cases = [("bad_attn_precision", n("Attention", ["q", "k", "v"], ["y"], name="attn_fp64", softmax_precision=11), []),
             ("bad_attn_bool_mask", n("Attention", ["q", "k", "v", "m"], ["y"], name="attn_bool"),
              [vi("m", TensorProto.BOOL, [3, 3])])]
    for name, node, extra in cases:
        model = helper.make_model(helper.make_graph([node], name, qkv + extra, [vi("y", f, [1, 2, 3, 4])]),
                                  opset_imports=[helper.make_opsetid("", 23)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save_model(model, os.path.join(HERE, name + ".onnx"))
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(HERE, name + ".onnx"))))


def sdpa_nodes(n, q, k, v, out, mask=None):
    """The nodes torch.onnx.export (TorchScript, opset 17) writes for
    F.scaled_dot_product_attention(q, k, v[, attn_mask]): the scale from
    q's last dimension (Shape, Slice, Cast, Sqrt, Div), sqrt(scale) on q
    and on the transposed k, MatMul, [Add mask,] Softmax, MatMul."""
    p = out + "/"
    nodes = [
        n("Shape", [q], [p + "shape"]),
        n("Constant", [], [p + "c_m1"], value=helper.make_tensor("v", TensorProto.INT64, [1], [-1])),
        n("Constant", [], [p + "c_big"], value=helper.make_tensor("v", TensorProto.INT64, [1], [2 ** 62])),
        n("Slice", [p + "shape", p + "c_m1", p + "c_big"], [p + "d"]),
        n("Cast", [p + "d"], [p + "df"], to=TensorProto.FLOAT),
        n("Sqrt", [p + "df"], [p + "sd"]),
        n("Constant", [], [p + "one"], value=helper.make_tensor("v", TensorProto.FLOAT, [], [1.0])),
        n("Div", [p + "one", p + "sd"], [p + "scale"]),
        n("Cast", [p + "scale"], [p + "scale_f"], to=TensorProto.FLOAT),
        n("Transpose", [k], [p + "kt"], perm=[0, 1, 3, 2]),
        n("Sqrt", [p + "scale_f"], [p + "s1"]),
        n("Mul", [q, p + "s1"], [p + "qs"]),
        n("Sqrt", [p + "scale_f"], [p + "s2"]),
        n("Mul", [p + "kt", p + "s2"], [p + "kts"]),
        n("MatMul", [p + "qs", p + "kts"], [p + "scores"]),
    ]
    if mask:
        nodes.append(n("Add", [p + "scores", mask], [p + "masked"]))
    nodes += [n("Softmax", [p + ("masked" if mask else "scores")], [p + "probs"], axis=-1),
              n("MatMul", [p + "probs", v], [out], name=out)]
    return nodes


def attn_fused():
    """The unfused attention PyTorch exports, fused at import: "sdpa"
    (scaled_dot_product_attention's nodes, the fused kernel), "hand"
    (q @ k.transpose(-2, -1) / sqrt(d), softmax, @ v: the fused kernel),
    "masked" (SDPA with an additive mask: through the same core,
    decomposed while the kernel takes no mask)."""
    global rng
    rng = np.random.default_rng(17)
    n = helper.make_node
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    nodes = sdpa_nodes(n, "q", "k", "v", "sdpa")
    nodes += [n("Transpose", ["k"], ["hand/kt"], perm=[0, 1, 3, 2]), n("MatMul", ["q", "hand/kt"], ["hand/s"]),
              n("Div", ["hand/s", "sqrt_d"], ["hand/sd"]), n("Softmax", ["hand/sd"], ["hand/p"], axis=-1),
              n("MatMul", ["hand/p", "v"], ["hand"], name="hand")]
    nodes += sdpa_nodes(n, "q", "k", "v", "masked", mask="m")
    ins = [vi("q", f, [2, 3, 5, 8]), vi("k", f, [2, 3, 7, 8]), vi("v", f, [2, 3, 7, 4]), vi("m", f, [5, 7])]
    outs = [vi(o, f, [2, 3, 5, 4]) for o in ("sdpa", "hand", "masked")]
    g = helper.make_graph(nodes, "attn_fused", ins, outs, [init("sqrt_d", np.array(np.sqrt(8.0), np.float32))])
    mask = w(5, 7, scale=1.0)
    mask[:, 6] = -np.inf
    save("attn_fused", g, 17, [w(2, 3, 5, 8, scale=1.0), w(2, 3, 7, 8, scale=1.0), w(2, 3, 7, 4, scale=1.0), mask])


def attn_nofuse():
    """Attention chains that must not fuse: the softmax's output is also a
    graph output ("probs"); the scores feed a second consumer ("twice")."""
    global rng
    rng = np.random.default_rng(16)
    n = helper.make_node
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    nodes = [n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), n("MatMul", ["q", "kt"], ["s"]),
             n("Softmax", ["s"], ["probs"], axis=-1), n("MatMul", ["probs", "v"], ["y"], name="probs_out"),
             n("Transpose", ["k"], ["kt2"], perm=[0, 2, 1]), n("MatMul", ["q", "kt2"], ["s2"]),
             n("Softmax", ["s2"], ["p2"], axis=-1), n("MatMul", ["p2", "v"], ["y2a"], name="twice_out"),
             n("Add", ["y2a", "s2_sum"], ["y2"]), n("ReduceSum", ["s2", "axes"], ["s2_sum"], keepdims=1)]
    nodes = nodes[:8] + [nodes[9], nodes[8]]
    ins = [vi("q", f, [2, 5, 8]), vi("k", f, [2, 6, 8]), vi("v", f, [2, 6, 4])]
    outs = [vi("y", f, [2, 5, 4]), vi("probs", f, [2, 5, 6]), vi("y2", f, [2, 5, 4])]
    g = helper.make_graph(nodes, "attn_nofuse", ins, outs, [init("axes", np.array([2], np.int64))])
    save("attn_nofuse", g, 17, [w(2, 5, 8, scale=1.0), w(2, 6, 8, scale=1.0), w(2, 6, 4, scale=1.0)])


def bn_act():
    """BatchNormalization followed by Relu or x * Sigmoid(x) (either operand
    order) as the normalized value's only consumers: fused at import. Not
    fused: a batch norm whose output is also a graph output, one whose
    output has a second consumer. Its own generator: the same bytes when
    run alone."""
    n = helper.make_node
    inits = []
    r = np.random.default_rng(1919)

    def w(*shape, scale=0.5):
        return (r.standard_normal(shape) * scale).astype(np.float32)

    def bn(i, x, y):
        names = ["bn%d.%s" % (i, k) for k in ("weight", "bias", "running_mean", "running_var")]
        vals = [w(4, scale=0.5) + 1.0, w(4, scale=0.5), w(4, scale=0.3), np.abs(w(4, scale=0.5)) + 0.5]
        inits.extend(init(nm, v.astype(np.float32)) for nm, v in zip(names, vals))
        return n("BatchNormalization", [x] + names, [y], name="bn%d" % i, epsilon=1e-5, momentum=0.9)
    nodes = [
        bn(1, "x", "b1"), n("Relu", ["b1"], ["r1"]),
        bn(2, "r1", "b2"), n("Sigmoid", ["b2"], ["s2"]), n("Mul", ["b2", "s2"], ["m2"]),
        bn(3, "m2", "b3"), n("Sigmoid", ["b3"], ["s3"]), n("Mul", ["s3", "b3"], ["m3"]),
        bn(4, "m3", "b4"), n("Relu", ["b4"], ["r4"]),
        bn(5, "r4", "b5"), n("Relu", ["b5"], ["r5"]), n("Add", ["b5", "r4"], ["a5"]),
        n("Add", ["r5", "a5"], ["y"]),
    ]
    g = helper.make_graph(nodes, "bn_act", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 5, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 5, 3]),
                           helper.make_tensor_value_info("b4", TensorProto.FLOAT, ["N", 4, 5, 3])], inits)
    save("bn_act", g, 17, [w(2, 4, 5, 3, scale=1.5)])


def conv_act():
    """Conv followed by HardSwish or Clip(0, 6) (ReLU6; its bounds from
    Constant nodes after the Conv, or initializers) as its only consumer:
    fused at import, the activation in the convolution's store. Not fused:
    Clip to other bounds, a HardSwish beside a second consumer. The input's
    scale puts the convolutions' outputs across 0, 6 and HardSwish's kinks.
    Its own generator: the same bytes when run alone."""
    n = helper.make_node
    r = np.random.default_rng(2027)

    def w(*shape, scale=0.5):
        return (r.standard_normal(shape) * scale).astype(np.float32)

    def f(v):
        return helper.make_tensor("v", TensorProto.FLOAT, [], [v])
    inits = [init("c%d.w" % i, w(3, 3, 3, 3)) for i in range(1, 6)] + \
            [init("c%d.b" % i, w(3)) for i in range(1, 6)] + \
            [init("zero", np.array(0.0, np.float32)), init("six", np.array(6.0, np.float32)),
             init("lo", np.array(-1.0, np.float32)), init("hi", np.array(1.5, np.float32))]

    def conv(i, x):
        return n("Conv", [x, "c%d.w" % i, "c%d.b" % i], ["y%d" % i], name="conv%d" % i, pads=[1, 1, 1, 1])
    nodes = [
        conv(1, "x"), n("Constant", [], ["k0"], value=f(0.0)), n("Constant", [], ["k6"], value=f(6.0)),
        n("Clip", ["y1", "k0", "k6"], ["r1"], name="relu6_const"),
        conv(2, "r1"), n("Clip", ["y2", "zero", "six"], ["r2"], name="relu6_init"),
        conv(3, "r2"), n("HardSwish", ["y3"], ["r3"], name="hswish"),
        conv(4, "r3"), n("Clip", ["y4", "lo", "hi"], ["r4"], name="clip_other"),
        conv(5, "r4"), n("HardSwish", ["y5"], ["r5"], name="hswish_shared"), n("Add", ["r5", "y5"], ["y"]),
    ]
    g = helper.make_graph(nodes, "conv_act", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 6, 5])], inits)
    save("conv_act", g, 17, [w(2, 3, 6, 5, scale=4.0)])


def shared():
    """Initializers that feed several nodes (torch.export merges equal
    ones; weight tying): "w" and "b" in two Conv nodes (one weight applied
    twice), "b" also as the bias of a third Conv (as YOLO11's Detect head
    under the dynamo exporter), "fc.w" in two Gemm nodes (transB=1 both).
    shared_untied is the same model with a copy per use (the reference for
    the gradients test_onnx.c compares). bad_shared_layout feeds one
    weight to a Gemm with transB=1 and one without (different layouts);
    bad_shared_state two BatchNormalization nodes with the same statistics."""
    n = helper.make_node
    f = TensorProto.FLOAT
    global rng
    rng = np.random.default_rng(1801)  # its own stream: the models above keep their bytes
    vals = {"w0": w(4, 3, 3, 3), "b0": w(4), "w": w(4, 4, 3, 3, scale=0.3), "b": w(4), "w3": w(4, 4, 1, 1),
            "fc.w": w(4, 4), "fc.b": w(4), "fc.b2": w(4)}

    def model(copies):
        def use(name, k):
            return name + "_copy%d" % k if copies and k else name
        nodes = [n("Conv", ["x", "w0", "b0"], ["h"], name="conv0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 n("Relu", ["h"], ["r0"]),
                 n("Conv", ["r0", "w", "b"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 n("Relu", ["c1"], ["r1"]),
                 n("Conv", ["r1", use("w", 1), use("b", 1)], ["c2"], name="conv2", kernel_shape=[3, 3],
                   pads=[1, 1, 1, 1]),
                 n("Conv", ["r0", "w3", use("b", 2)], ["c3"], name="conv3", kernel_shape=[1, 1]),
                 n("Add", ["c2", "c3"], ["s"]),
                 n("GlobalAveragePool", ["s"], ["g"]),
                 n("Flatten", ["g"], ["fl"], axis=1),
                 n("Gemm", ["fl", "fc.w", "fc.b"], ["f1"], name="fc1", transB=1),
                 n("Relu", ["f1"], ["fr"]),
                 n("Gemm", ["fr", use("fc.w", 1), "fc.b2"], ["logits"], name="fc2", transB=1)]
        inits = [init(k, v) for k, v in vals.items()]
        if copies:
            inits += [init("w_copy1", vals["w"]), init("b_copy1", vals["b"]), init("b_copy2", vals["b"]),
                      init("fc.w_copy1", vals["fc.w"])]
        return helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", f, ["N", 3, 6, 6])],
                                 [helper.make_tensor_value_info("logits", f, ["N", 4])], inits)
    x = w(2, 3, 6, 6, scale=1.0)
    save("shared", model(False), 17, [x])
    for name, graph in [("shared_untied", model(True)),
                        ("bad_shared_layout", helper.make_graph(
                            [n("Gemm", ["x", "m", "c"], ["y1"], name="gemm_t", transB=1),
                             n("Gemm", ["y1", "m", "c"], ["y"], name="gemm_n")], "bad_shared_layout",
                            [helper.make_tensor_value_info("x", f, [2, 3])],
                            [helper.make_tensor_value_info("y", f, [2, 3])],
                            [init("m", w(3, 3)), init("c", w(3))])),
                        ("bad_shared_state", helper.make_graph(
                            [n("BatchNormalization", ["x", "s", "b", "m", "v"], ["y1"], name="bn_a"),
                             n("BatchNormalization", ["y1", "s", "b", "m", "v"], ["y"], name="bn_b")],
                            "bad_shared_state", [helper.make_tensor_value_info("x", f, [1, 2, 3, 3])],
                            [helper.make_tensor_value_info("y", f, [1, 2, 3, 3])],
                            [init("s", w(2)), init("b", w(2)), init("m", w(2)), init("v", 1 + np.abs(w(2)))]))]:
        model_ = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_models.py")
        model_.ir_version = 8
        onnx.checker.check_model(model_)
        onnx.save_model(model_, os.path.join(HERE, name + ".onnx"))
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(HERE, name + ".onnx"))))


def fashion_cnn():
    """A small conv net for Fashion-MNIST's 1x28x28 images and 10 classes
    (examples/finetune_onnx.c's longer run in README): two Conv (3x3,
    padded) + BatchNormalization + Relu + MaxPool stages, GlobalAveragePool,
    Flatten, Gemm; PyTorch's default initialization (uniform, bound
    1/sqrt(fan_in)), PyTorch-style names."""
    global rng
    rng = np.random.default_rng(1802)  # its own stream: the models above keep their bytes
    n = helper.make_node
    f = TensorProto.FLOAT

    def u(fan_in, *shape):
        return rng.uniform(-1, 1, shape).astype(np.float32) / np.float32(np.sqrt(fan_in))
    nodes, inits, x = [], [], "x"
    for i, (ci, co) in enumerate([(1, 16), (16, 32)], start=1):
        nodes += [n("Conv", [x, "conv%d.weight" % i, "conv%d.bias" % i], ["c%d" % i], name="conv%d" % i,
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  n("BatchNormalization", ["c%d" % i] + ["bn%d.%s" % (i, k) for k in
                                                         ("weight", "bias", "running_mean", "running_var")],
                    ["b%d" % i], name="bn%d" % i, epsilon=1e-5, momentum=0.9),
                  n("Relu", ["b%d" % i], ["r%d" % i]),
                  n("MaxPool", ["r%d" % i], ["p%d" % i], kernel_shape=[2, 2], strides=[2, 2])]
        inits += [init("conv%d.weight" % i, u(ci * 9, co, ci, 3, 3)), init("conv%d.bias" % i, u(ci * 9, co)),
                  init("bn%d.weight" % i, np.ones(co, np.float32)), init("bn%d.bias" % i, np.zeros(co, np.float32)),
                  init("bn%d.running_mean" % i, np.zeros(co, np.float32)),
                  init("bn%d.running_var" % i, np.ones(co, np.float32))]
        x = "p%d" % i
    nodes += [n("GlobalAveragePool", [x], ["g"]), n("Flatten", ["g"], ["fl"], axis=1),
              n("Gemm", ["fl", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1)]
    inits += [init("fc.weight", u(32, 10, 32)), init("fc.bias", u(32, 10))]
    g = helper.make_graph(nodes, "fashion_cnn", [helper.make_tensor_value_info("x", f, ["N", 1, 28, 28])],
                          [helper.make_tensor_value_info("logits", f, ["N", 10])], inits)
    save("fashion_cnn", g, 17, [w(2, 1, 28, 28, scale=1.0)])


def gelu():
    """The exact GELU as PyTorch exports it, x * (erf(x / sqrt 2) + 1) * 0.5,
    fused at import into one GELU: "div" (Div by sqrt 2) and "mul" (Mul by
    1/sqrt 2, the constants on the other side). Not fused: "quarter" (0.25
    where 0.5 is), "erf_out" (the Erf's value is also a graph output)."""
    global rng
    rng = np.random.default_rng(19)
    n = helper.make_node
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    nodes = [n("Div", ["x", "sqrt2"], ["d/s"]), n("Erf", ["d/s"], ["d/e"]), n("Add", ["d/e", "one"], ["d/a"]),
             n("Mul", ["x", "d/a"], ["d/m"]), n("Mul", ["d/m", "half"], ["div"], name="div"),
             n("Mul", ["rsqrt2", "x"], ["m/s"]), n("Erf", ["m/s"], ["m/e"]), n("Add", ["one", "m/e"], ["m/a"]),
             n("Mul", ["m/a", "x"], ["m/m"]), n("Mul", ["half", "m/m"], ["mul"], name="mul"),
             n("Div", ["x", "sqrt2"], ["q/s"]), n("Erf", ["q/s"], ["q/e"]), n("Add", ["q/e", "one"], ["q/a"]),
             n("Mul", ["x", "q/a"], ["q/m"]), n("Mul", ["q/m", "c_quarter"], ["quarter"], name="quarter"),
             n("Div", ["x", "sqrt2"], ["o/s"]), n("Erf", ["o/s"], ["erf"]), n("Add", ["erf", "one"], ["o/a"]),
             n("Mul", ["x", "o/a"], ["o/m"]), n("Mul", ["o/m", "half"], ["erf_out"], name="erf_out")]
    shape = [2, 3, 7]
    outs = [vi(o, f, shape) for o in ("div", "mul", "quarter", "erf", "erf_out")]
    c = lambda name, v: init(name, np.array(v, np.float32))
    g = helper.make_graph(nodes, "gelu", [vi("x", f, shape)], outs,
                          [c("sqrt2", np.sqrt(2.0)), c("rsqrt2", 1 / np.sqrt(2.0)), c("one", 1.0), c("half", 0.5),
                           c("c_quarter", 0.25)])
    save("gelu", g, 17, [w(*shape, scale=2.0)])


def norms():
    """InstanceNormalization and GroupNormalization. norms_instance (opset
    17): 3-D and 4-D inputs with per-channel scale and B initializers, the
    epsilon attribute, and PyTorch's export of GroupNorm(1, C) ("pf":
    Reshape to [N, 1, -1], InstanceNormalization with Constant ones and
    zeros, Reshape back, Mul and Add per channel). norms_group18 (opset 18:
    scale and bias per group) and norms_group21 (opset 21: per channel,
    stash_type given): num_groups 1, C and between, epsilon given; in
    norms_group21 also "gs", whose scale a Reshape reads too. Its own
    generator: the same bytes when run alone."""
    global rng
    rng = np.random.default_rng(4203)
    n = helper.make_node
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    c = lambda name, v: init(name, np.asarray(v, np.float32))
    # inputs not centred at 0 nor of unit spread: the statistics matter
    x3 = w(2, 4, 7, scale=2.0) + 1.5
    x4 = w(2, 6, 5, 3, scale=0.7) - 0.8
    const = lambda out, v: n("Constant", [], [out], value=numpy_helper.from_array(np.asarray(v, np.float32), out))
    nodes = [n("InstanceNormalization", ["x3", "in3.scale", "in3.B"], ["in3"], name="in3"),
             n("InstanceNormalization", ["x4", "in4.scale", "in4.B"], ["in4"], name="in4", epsilon=1e-2),
             n("Reshape", ["x4", "pf.shape"], ["pf/r"]), const("pf/one", [1.0]), const("pf/zero", [0.0]),
             n("InstanceNormalization", ["pf/r", "pf/one", "pf/zero"], ["pf/n"], name="pf", epsilon=1e-5),
             n("Reshape", ["pf/n", "pf.back"], ["pf/b"]), n("Mul", ["pf/b", "pf.weight"], ["pf/m"]),
             n("Add", ["pf/m", "pf.bias"], ["pf"])]
    g = helper.make_graph(nodes, "norms_instance", [vi("x3", f, ["N", 4, 7]), vi("x4", f, ["N", 6, 5, 3])],
                          [vi("in3", f, ["N", 4, 7]), vi("in4", f, ["N", 6, 5, 3]), vi("pf", f, ["N", 6, 5, 3])],
                          [c("in3.scale", w(4) + 1.0), c("in3.B", w(4)), c("in4.scale", w(6) + 1.0), c("in4.B", w(6)),
                           init("pf.shape", np.array([0, 1, -1], np.int64)),
                           init("pf.back", np.array([0, 6, 5, 3], np.int64)),
                           c("pf.weight", w(6, 1, 1) + 1.0), c("pf.bias", w(6, 1, 1))])
    save("norms_instance", g, 17, [x3, x4])
    for opset in (18, 21):
        nodes, inits = [], []
        for name, groups, eps in (("g1", 1, None), ("gc", 6, 1e-3), ("g3", 3, None)):
            k = groups if opset < 21 else 6
            inits += [c(name + ".scale", w(k) + 1.0), c(name + ".bias", w(k))]
            attrs = {"num_groups": groups}
            if eps is not None:
                attrs["epsilon"] = eps
            if opset >= 21 and name == "g3":
                attrs["stash_type"] = 1
            nodes.append(n("GroupNormalization", ["x4", name + ".scale", name + ".bias"], [name], name=name, **attrs))
        nodes.append(n("GroupNormalization", ["x3", "g2.scale", "g2.bias"], ["g2"], name="g2", num_groups=2))
        inits += [c("g2.scale", w(2 if opset < 21 else 4) + 1.0), c("g2.bias", w(2 if opset < 21 else 4))]
        outs = [vi(o, f, ["N", 6, 5, 3]) for o in ("g1", "gc", "g3")] + [vi("g2", f, ["N", 4, 7])]
        if opset >= 21:  # scale also read by another op (Reshape, then Mul): not a parameter
            nodes += [n("GroupNormalization", ["x3", "gs.scale", "gs.bias"], ["gs"], name="gs", num_groups=4),
                      n("Reshape", ["gs.scale", "gs.col"], ["gs/col"]), n("Mul", ["x3", "gs/col"], ["ms"])]
            inits += [c("gs.scale", w(4) + 1.0), c("gs.bias", w(4)), init("gs.col", np.array([4, 1], np.int64))]
            outs += [vi("gs", f, ["N", 4, 7]), vi("ms", f, ["N", 4, 7])]
        g = helper.make_graph(nodes, "norms_group%d" % opset, [vi("x3", f, ["N", 4, 7]), vi("x4", f, ["N", 6, 5, 3])],
                              outs, inits)
        save("norms_group%d" % opset, g, opset, [x3, x4], ir_version=10 if opset >= 21 else 8,
             check=opset >= 21)


def lowered():
    """Tile, CumSum and Einsum (opset 17), lowered at import onto graph
    ops: of run-time values and of initializers (folded), with batch N
    symbolic. tile: repeats on every axis, batch axis included, and of a
    constant; cumsum: axes 1 and 2 (negative too), exclusive and reverse,
    a constant's along axis 0; einsum: the contractions transformers
    export (attention scores and mix, a batched and a plain matmul, a
    projection by an initializer), a transpose, a reduction and a fully
    summed operand. Its own generator: the same bytes when run alone."""
    global rng
    rng = np.random.default_rng(4242)
    n = helper.make_node
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    i64 = lambda name, v: init(name, np.asarray(v, np.int64))
    x = w(2, 3, 4, scale=1.0)
    nodes = [n("Tile", ["x", "r1"], ["t1"], name="t1"), n("Tile", ["x", "r2"], ["t2"], name="t2"),
             n("Tile", ["c", "r3"], ["t3"], name="t3"), n("Relu", ["x"], ["rx"]), n("Tile", ["rx", "r4"], ["t4"], name="t4")]
    g = helper.make_graph(nodes, "tile", [vi("x", f, ["N", 3, 4])],
                          [vi("t1", f, ["N", 6, 12]), vi("t2", f, ["2N", 3, 8]), vi("t3", f, [6, 6]),
                           vi("t4", f, ["N", 3, 4])],
                          [i64("r1", [1, 2, 3]), i64("r2", [2, 1, 2]), i64("r3", [3, 2]), i64("r4", [1, 1, 1]),
                           init("c", w(2, 3))])
    save("tile", g, 17, [x])
    x = w(2, 5, 6, scale=1.0)
    nodes = [n("CumSum", ["x", "a2"], ["s1"], name="s1"),
             n("CumSum", ["x", "a1"], ["s2"], name="s2", exclusive=1),
             n("CumSum", ["x", "am1"], ["s3"], name="s3", reverse=1),
             n("CumSum", ["x", "a1"], ["s4"], name="s4", exclusive=1, reverse=1),
             n("CumSum", ["c", "a0"], ["s5"], name="s5", reverse=1)]
    g = helper.make_graph(nodes, "cumsum", [vi("x", f, ["N", 5, 6])], [vi(o, f, ["N", 5, 6]) for o in ("s1", "s2", "s3", "s4")] + [vi("s5", f, [4, 3])],
                          [i64("a2", 2), i64("a1", [1]), i64("am1", -1), i64("a0", 0), init("c", w(4, 3))])
    save("cumsum", g, 17, [x])
    q, k, v, a = w(2, 3, 5, 4, scale=1.0), w(2, 3, 6, 4, scale=1.0), w(2, 3, 6, 4, scale=1.0), w(2, 5, 6, scale=1.0)
    nodes = [n("Einsum", ["q", "k"], ["scores"], name="scores", equation="bhid,bhjd->bhij"),
             n("Einsum", ["scores", "v"], ["mix"], name="mix", equation="bhij,bhjd->bhid"),
             n("Einsum", ["a", "m"], ["bmm"], name="bmm", equation="bij,bjk->bik"),
             n("Einsum", ["a", "p"], ["proj"], name="proj", equation="bnc, cd -> bnd"),
             n("Einsum", ["a"], ["tr"], name="tr", equation="bij->bji"),
             n("Einsum", ["a"], ["red"], name="red", equation="bij->bi"),
             n("Einsum", ["a", "p"], ["summed"], name="summed", equation="bij,jk->bk"),
             n("Einsum", ["a", "p"], ["implicit"], name="implicit", equation="bij,jk")]
    g = helper.make_graph(nodes, "einsum", [vi("q", f, ["N", 3, 5, 4]), vi("k", f, ["N", 3, 6, 4]),
                                            vi("v", f, ["N", 3, 6, 4]), vi("a", f, ["N", 5, 6]), vi("m", f, ["N", 6, 3])],
                          [vi(o, f, sh) for o, sh in (("scores", ["N", 3, 5, 6]), ("mix", ["N", 3, 5, 4]), ("bmm", ["N", 5, 3]),
                                                     ("proj", ["N", 5, 7]), ("tr", ["N", 6, 5]), ("red", ["N", 5]),
                                                     ("summed", ["N", 7]), ("implicit", ["N", 5, 7]))],
                          [init("p", w(6, 7))])
    save("einsum", g, 17, [q, k, v, a, w(2, 6, 3, scale=1.0)])


def rank6():
    """Issue 42's window partitioning and shifted-window mask. rank6 (opset
    17): Swin's [B, H/w, w, W/w, w, C] Reshape -> Transpose (0,1,3,2,4,5)
    -> Reshape into windows ("win") and back ("unwin": merged to a rank-4
    transpose); MaxViT's grid partition [B, C, gh, p, gw, p] -> (0,2,4,3,5,1),
    which merges to nothing less than rank 6 (two stepped transposes, then
    a Mul: "grid"); a rank-8 reversal (all axes of size 2 and one of 3: many
    steps, "rev8") and a rank-7 permutation with an axis of size 1
    ("perm7"); Transpose then Expand of a rank-6 constant, folded, added to
    y ("cexp"); ScatterND of constants (rows, reduction add at k = 2, an int64
    data cast to float, negative indices) added to m ("mask"), as Swin builds
    its attention mask; ScatterND into run-time data m (rows, then add
    and mul with repeated indices, then rows of run-time updates: "scat");
    Shape of a Sigmoid's output (GhostNetV2's attention
    branch) as a Reshape target ("sig"). Its own generator: the same bytes when run alone."""
    global rng
    rng = np.random.default_rng(4206)
    n = helper.make_node
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    i64 = lambda name, v: init(name, np.array(v, np.int64))
    nodes = [n("Reshape", ["x", "s.part"], ["w/r"]), n("Transpose", ["w/r"], ["w/t"], perm=[0, 1, 3, 2, 4, 5]),
             n("Reshape", ["w/t", "s.win"], ["win"]),
             n("Reshape", ["win", "s.unpart"], ["u/r"]), n("Transpose", ["u/r"], ["u/t"], perm=[0, 1, 3, 2, 4, 5]),
             n("Reshape", ["u/t", "s.x"], ["unwin"]),
             n("Reshape", ["xm", "s.grid"], ["g/r"]), n("Transpose", ["g/r"], ["g/t"], perm=[0, 2, 4, 3, 5, 1]),
             n("Reshape", ["g/t", "s.cells"], ["g/c"]), n("Mul", ["g/c", "gscale"], ["grid"]),
             n("Reshape", ["x", "s.r8"], ["r8/r"]), n("Transpose", ["r8/r"], ["r8/t"], perm=[7, 6, 5, 4, 3, 2, 1, 0]),
             n("Reshape", ["r8/t", "s.flat"], ["rev8"]),
             n("Reshape", ["x", "s.r7"], ["p7/r"]), n("Transpose", ["p7/r"], ["p7/t"], perm=[3, 0, 6, 2, 5, 1, 4]),
             n("Reshape", ["p7/t", "s.flat"], ["perm7"]),
             n("Transpose", ["c6"], ["c/t"], perm=[5, 4, 3, 2, 1, 0]), n("Reshape", ["c/t", "s.c3"], ["c/r"]),
             n("Expand", ["c/r", "s.cexp"], ["c/e"]), n("Add", ["y", "c/e"], ["cexp"]),
             n("ScatterND", ["zeros", "rows", "rowvals"], ["sc/a"]),
             n("ScatterND", ["sc/a", "cells", "cellvals"], ["sc/b"], reduction="add"),
             n("ScatterND", ["izeros", "ineg", "ivals"], ["sc/i"]), n("Cast", ["sc/i"], ["sc/f"], to=f),
             n("Add", ["sc/b", "sc/f"], ["sc/s"]), n("Add", ["m", "sc/s"], ["mask"]),
             n("ScatterND", ["m", "rows", "rowvals"], ["rt/a"]), n("Relu", ["rowvals"], ["rt/u"]),
             n("ScatterND", ["rt/a", "cells", "rt/cv"], ["rt/b"], reduction="add"),
             n("ScatterND", ["rt/b", "rowsdup", "rt/u2"], ["rt/c"], reduction="mul"),
             n("ScatterND", ["rt/c", "rows", "rt/u"], ["scat"]),
             n("Sigmoid", ["y"], ["sg"]), n("Shape", ["sg"], ["sg/s"]), n("Reshape", ["y", "s.minus1"], ["sg/f"]),
             n("Reshape", ["sg/f", "sg/s"], ["sg/b"]), n("Mul", ["sg", "sg/b"], ["sig"])]
    inits = [i64("s.part", [2, 2, 4, 2, 4, 3]), i64("s.win", [8, 16, 3]), i64("s.unpart", [2, 2, 2, 4, 4, 3]),
             i64("s.x", [2, 8, 8, 3]), i64("s.grid", [2, 3, 2, 2, 2, 2]), i64("s.cells", [2, 4, 4, 3]),
             init("gscale", w(3) + 1.0), i64("s.r8", [2, 2, 2, 2, 2, 2, 2, 3]), i64("s.flat", [2, 192]),
             i64("s.r7", [2, 4, 1, 2, 4, 2, 3]),
             init("c6", w(1, 2, 1, 3, 1, 1)), i64("s.c3", [1, 3, 1, 2]), i64("s.cexp", [2, 3, 4, 2]),
             init("zeros", np.zeros((4, 4), np.float32)), i64("rows", [[0], [2]]), init("rowvals", w(2, 4)),
             i64("cells", [[1, 1], [3, 2], [1, 1]]), init("cellvals", w(3)),
             i64("izeros", np.zeros((4, 4), np.int64)), i64("ineg", [[-1, -1], [0, -4]]), i64("ivals", [7, -3]), i64("s.minus1", [-1]),
             i64("rowsdup", [[3], [1], [3]]), init("rt/u2", w(3, 4) + 1.0), init("rt/cv", w(3))]
    ins = [vi("x", f, [2, 8, 8, 3]), vi("xm", f, [2, 3, 4, 4]), vi("y", f, [2, 3, 4, 2]), vi("m", f, [4, 4])]
    outs = [vi("win", f, [8, 16, 3]), vi("unwin", f, [2, 8, 8, 3]), vi("grid", f, [2, 4, 4, 3]),
            vi("rev8", f, [2, 192]), vi("perm7", f, [2, 192]), vi("cexp", f, [2, 3, 4, 2]), vi("mask", f, [4, 4]),
            vi("sig", f, [2, 3, 4, 2]), vi("scat", f, [4, 4])]
    g = helper.make_graph(nodes, "rank6", ins, outs, inits)
    save("rank6", g, 17, [w(2, 8, 8, 3, scale=1.0), w(2, 3, 4, 4, scale=1.0), w(2, 3, 4, 2, scale=1.0),
                          w(4, 4, scale=1.0)])
    # refused: a rank-6 value read by an elementwise op; ScatterND max into run-time data
    for name, node in (("bad_rank6", n("Relu", ["x6"], ["y"], name="relu6")),
                       ("bad_scatter", n("ScatterND", ["x", "rows", "rowvals"], ["y"], name="scatter_rt",
                                         reduction="max"))):
        pre = [n("Reshape", ["x", "s.x6"], ["x6"])] if name == "bad_rank6" else []
        graph = helper.make_graph(pre + [node], name, [vi("x", f, [4, 4])], [vi("y", f, None)],
                                  [i64("s.x6", [1, 1, 2, 2, 2, 2]), i64("rows", [[0]]), init("rowvals", w(1, 4))])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        model.ir_version = 8
        onnx.save_model(model, os.path.join(HERE, name + ".onnx"))
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(HERE, name + ".onnx"))))
    # malformed: an index past its dimension (folded: constant data), updates of the wrong shape (run time)
    for name, node in (("bad_scatter_range", n("ScatterND", ["zeros", "far", "rowvals"], ["s"], name="scatter_far")),
                       ("bad_scatter_shape", n("ScatterND", ["x", "rows", "short"], ["s"], name="scatter_short"))):
        graph = helper.make_graph([node, n("Add", ["x", "s"], ["y"])], name, [vi("x", f, [4, 4])], [vi("y", f, None)],
                                  [init("zeros", np.zeros((4, 4), np.float32)), i64("far", [[4]]), i64("rows", [[0]]),
                                   init("rowvals", w(1, 4)), init("short", w(1, 3))])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save_model(model, os.path.join(HERE, name + ".onnx"))
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(HERE, name + ".onnx"))))


def einsum_maxvit():
    """Einsum as the importer maps it (einsum.c): MaxViT's two rank-5
    contractions with spaces ("qk", "av"), a batched matmul with the output
    permuted ("perm_out"), a contraction over two labels ("two_k"), an
    outer product, the implicit output ("implicit": "ij,jk" is "ik"), a
    transpose of one operand and an inner product to a scalar. bad_einsum_diag:
    a diagonal. Its own generator."""
    global rng
    rng = np.random.default_rng(4207)
    n = helper.make_node
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    cases = [("qk", "B G H I D, B G H J D -> B G H I J", ["q", "k"]),
             ("av", "B G H I J, B G H J D -> B G H I D", ["qk", "k"]),
             ("perm_out", "bij,bjk->kbi", ["m1", "m2"]), ("two_k", "abc,cbd->da", ["t1", "t2"]),
             ("outer", "i,j->ij", ["v1", "v2"]), ("implicit", "ij,jk", ["p1", "p2"]),
             ("transposed", "abc->cab", ["t1"]), ("inner", "i,i->", ["v1", "v1"])]
    nodes = [n("Einsum", ins, [name], name=name, equation=eq) for name, eq, ins in cases]
    shapes = {"q": [2, 3, 2, 4, 5], "k": [2, 3, 2, 4, 5], "m1": [2, 3, 4], "m2": [2, 4, 6], "t1": [3, 4, 5],
              "t2": [5, 4, 2], "v1": [5], "v2": [3], "p1": [3, 4], "p2": [4, 2]}
    outs = {"qk": [2, 3, 2, 4, 4], "av": [2, 3, 2, 4, 5], "perm_out": [6, 2, 3], "two_k": [2, 3], "outer": [5, 3],
            "implicit": [3, 2], "transposed": [5, 3, 4], "inner": []}
    g = helper.make_graph(nodes, "einsum_maxvit", [vi(k, f, v) for k, v in shapes.items()],
                          [vi(k, f, v) for k, v in outs.items()])
    save("einsum_maxvit", g, 17, [w(*v, scale=1.0) for v in shapes.values()])
    for name, eq, ins in (("bad_einsum_diag", "ii->i", ["x"]),):
        graph = helper.make_graph([n("Einsum", ins, ["y"], name="es", equation=eq)], name, [vi("x", f, [3, 3])],
                                  [vi("y", f, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save_model(model, os.path.join(HERE, name + ".onnx"))
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(HERE, name + ".onnx"))))


def fp16():
    """fp16 models as onnxconverter-common's float16 conversion writes them
    (pip install onnxconverter-common), from one fp32 conv net (Conv with
    float16-subnormal weights, BatchNormalization, Relu, MaxPool, grouped
    Conv, x * Sigmoid(x), Mul by a Constant, GlobalAveragePool, Flatten,
    Gemm; outputs the logits and the activations a2 through an Identity):
      fp16_io      keep_io_types=False: float16 initializers (raw_data), the
                   Constant's value rewritten into int32_data (onnx.helper's
                   form), float16 input and outputs;
      fp16_keepio  keep_io_types=True: float input and outputs, Cast to
                   float16 after the input and back to float before each
                   output.
    ONNX Runtime computes them in fp16 (its outputs: .out*.npy). Beside
    them, .ref*.npy: ONNX Runtime's fp32 outputs of the same net with the
    weights and the input rounded to half -- what teenycl computes (fp32
    arithmetic on the half values; fp16_io's outputs then rounded to half).
    Asserted here: each of ONNX Runtime's fp16 output elements lies within
    one half-ulp of itself plus one half-ulp of the output's largest value
    of that reference, rounded to half (fp16 intermediates lose absolute
    precision where an element arises by cancellation, as convolutions'
    near-zero outputs do): the bound tests/test_onnx_half.c's tolerance
    rests on."""
    from onnxconverter_common import float16
    global rng
    rng = np.random.default_rng(46)
    n = helper.make_node
    nodes = [n("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("BatchNormalization", ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"], ["b1"],
               name="bn1"),
             n("Relu", ["b1"], ["r1"]), n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", kernel_shape=[3, 3], group=2,
               pads=[1, 1, 1, 1]),
             n("Sigmoid", ["c2"], ["s2"]), n("Mul", ["c2", "s2"], ["m2"]),
             n("Constant", [], ["scale"], name="scale",
               value=numpy_helper.from_array(np.array([1, 1.0009765625, 0.5, 2, 0.25, 1.5, 0.75, 1], np.float32)
                                             .reshape(1, 8, 1, 1), "scale")),
             n("Mul", ["m2", "scale"], ["a2"]),
             n("GlobalAveragePool", ["a2"], ["g"]), n("Flatten", ["g"], ["f"], axis=1),
             n("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
             n("Identity", ["a2"], ["act"])]  # a2 itself as an output trips the converter's keep_io_types
    cw = w(8, 3, 3, 3)
    cw[0, 0, 0, :] = [3e-6, -2e-7, 6.0e-5]  # float16 subnormals (below 2^-14), one that rounds to 0
    inits = [init("conv1.weight", cw), init("conv1.bias", w(8)), init("bn1.weight", 1 + w(8, scale=0.1)),
             init("bn1.bias", w(8, scale=0.1)), init("bn1.running_mean", w(8, scale=0.1)),
             init("bn1.running_var", 1 + np.abs(w(8, scale=0.2))), init("conv2.weight", w(8, 4, 3, 3)),
             init("conv2.bias", w(8)), init("fc.weight", w(5, 8)), init("fc.bias", w(5))]
    vi = helper.make_tensor_value_info
    f = TensorProto.FLOAT
    g = helper.make_graph(nodes, "fp16net", [vi("x", f, ["N", 3, 8, 8])],
                          [vi("logits", f, ["N", 5]), vi("act", f, ["N", 8, 4, 4])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_models.py")
    model.ir_version = 8
    x = w(2, 3, 8, 8, scale=1.0)
    # the reference: the fp32 net on half-rounded weights (Constant included) and input
    m32 = onnx.ModelProto()
    m32.CopyFrom(model)
    for t in m32.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16).astype(np.float32), t.name))
    x_half = x.astype(np.float16)
    refs = ort.InferenceSession(m32.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x_half.astype(np.float32)})
    for name, keep in (("fp16_io", False), ("fp16_keepio", True)):
        m16 = float16.convert_float_to_float16(model, keep_io_types=keep)
        for node in m16.graph.node:
            if node.op_type == "Constant":  # the value as onnx.helper writes float16: bits in int32_data
                a = numpy_helper.to_array(node.attribute[0].t)
                node.attribute[0].t.CopyFrom(helper.make_tensor("scale", TensorProto.FLOAT16, a.shape, a.ravel()))
                assert len(node.attribute[0].t.int32_data) == 8 and not node.attribute[0].t.raw_data
        del m16.graph.value_info[:]  # the converter's, partly stale with keep_io_types (ONNX Runtime refuses them)
        save(name, m16.graph, 17, [x if keep else x_half])
        outs = ort.InferenceSession(os.path.join(HERE, name + ".onnx"), providers=["CPUExecutionProvider"]).run(
            None, {"x": x if keep else x_half})
        for k, (o, r) in enumerate(zip(outs, refs)):
            np.save(os.path.join(HERE, "%s.ref%d.npy" % (name, k)), r.astype(np.float32))
            half = r.astype(np.float16).astype(np.float32)
            ulp = np.spacing(np.abs(half).astype(np.float16)).astype(np.float32)
            ulp_max = np.float32(np.spacing(np.float16(np.abs(r).max())))
            dev = np.abs(o.astype(np.float32) - half) / (ulp + ulp_max)
            print("  %s output %d: ONNX Runtime fp16 within %.2f x (1 half-ulp of the element + 1 of the output's "
                  "largest) of the fp32 reference" % (name, k, dev.max()))
            assert dev.max() <= 1.0


if __name__ == "__main__":
    import sys
    # python3 make_models.py [NAME...]: only those functions (the others'
    # files stay as committed; the shared generator makes a full rerun
    # rewrite them)
    ALL = [convnet, shapes, conv1d, sce, external, pools, unsupported, convt, convt_unsupported, gemm, resize, sce_options, sce_nd, sce_unsupported, attention, attention_unsupported, attn_fused, attn_nofuse, bn_act, conv_act, shared, fashion_cnn, gelu, scalar_feed, slice_feed, shape_checks, norms, lowered, rank6, einsum_maxvit, fp16]
    for fn in ALL:
        if len(sys.argv) < 2 or fn.__name__ in sys.argv[1:]:
            fn()
