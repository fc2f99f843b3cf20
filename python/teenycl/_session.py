"""Session: run and fine-tune an imported ONNX model (teenycl_onnx.h)."""
import os
from collections import namedtuple
from ctypes import byref, c_char_p, c_float, c_int, c_int32, c_int64, c_void_p

import numpy as np

from ._core import Context
from ._lib import (ERR_ARG, ERR_SHAPE, ERR_STATE, ONNX_FLOAT, ONNX_INT32, ONNX_INT64, OPTIM_KINDS, OnnxFeed,
                   OnnxParams, OptimParams, PlanParams, TeenyError, handle, lib, shape_array)

Value = namedtuple("Value", "name dtype shape")
Value.__doc__ = "A model input or output: its name, NumPy dtype and shape at the session's batch."

_Trainer = namedtuple("_Trainer", "plan opt lr")


class Session:
    """An ONNX model imported onto a device, for inference and fine-tuning.

    model: the .onnx file's path. device: a spec string (see Context) or a
    Context to share. batch: the batch to import for (None: the model's
    own; the exporter's shape arithmetic is folded for it, so another
    batch needs another Session). constants: {name: array} for graph
    inputs the importer can only take as constants (a weight fed as an
    input, a shape operand); other inputs are fed to run().

    inputs, outputs: lists of Value (name, dtype, shape). run() takes
    float32 inputs (int32 for class labels) and returns float32 outputs.
    """

    def __init__(self, model, device=None, batch=None, constants=None):
        self.ctx = device if isinstance(device, Context) else Context(device)
        self._m = self._plan = self._trainer = self._labels = None
        keep = []  # the feed arrays, alive for the load call
        feeds = (OnnxFeed * max(len(constants or {}), 1))()
        for f, (name, value) in zip(feeds, (constants or {}).items()):
            a = np.asarray(value)
            a = np.ascontiguousarray(a, np.int64 if a.dtype.kind in "iub" else np.float32)
            keep.append((name.encode(), a, shape_array(a.shape)))
            f.name, f.dtype, f.ndim = keep[-1][0], ONNX_INT64 if a.dtype == np.int64 else ONNX_FLOAT, a.ndim
            f.shape, f.data = keep[-1][2], a.ctypes.data
        p = OnnxParams(batch or 0, 0, None, len(keep), feeds)
        h = handle()
        self.ctx.check(lib.teeny_onnx_load(self.ctx._h, os.fsencode(model), byref(p), byref(h)))
        self._m = h.value
        self._g = lib.teeny_onnx_graph(self._m)
        self.batch = lib.teeny_onnx_batch(self._m)
        self.inputs, self._in_nodes = [], []
        for i in range(lib.teeny_onnx_input_count(self._m)):
            name, node, dtype, ndim, shape = c_char_p(), c_int32(), c_int(), c_int(), (c_int64 * 5)()
            self.ctx.check(lib.teeny_onnx_input(self._m, i, byref(name), byref(node), byref(dtype)))
            self.ctx.check(lib.teeny_graph_node_info(self._g, node, None, byref(ndim), shape))
            self.inputs.append(Value(name.value.decode(), np.dtype(np.int32 if dtype.value == ONNX_INT32
                                                                   else np.float32), tuple(shape[:ndim.value])))
            self._in_nodes.append(node.value)
        self.outputs, self._out_nodes = [], []
        for i in range(lib.teeny_onnx_output_count(self._m)):
            name, node, ndim, shape = c_char_p(), c_int32(), c_int(), (c_int64 * 8)()
            self.ctx.check(lib.teeny_onnx_output(self._m, i, byref(name), byref(node), byref(ndim), shape))
            self.outputs.append(Value(name.value.decode(), np.dtype(np.float32), tuple(shape[:ndim.value])))
            self._out_nodes.append(node.value)

    def close(self):
        """Free the plans, the optimizer and the model (also done when the
        object is collected); the Context lives on while others use it."""
        if getattr(self, "_m", None):
            if self._trainer:
                lib.teeny_optimizer_destroy(self._trainer.opt)
                lib.teeny_plan_destroy(self._trainer.plan)
            lib.teeny_plan_destroy(self._plan)
            lib.teeny_onnx_destroy(self._m)
            self._m = self._g = self._plan = self._trainer = None

    def _open(self):
        """The graph, or TeenyError once the session is closed."""
        if not self._m:
            raise TeenyError(ERR_STATE, "the session is closed")
        return self._g

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- inference ----

    def run(self, feeds):
        """Run the model on {input name: array}; returns {output name:
        float32 array}. Each input goes to the device in one write, from
        its own buffer when it is C-contiguous of the input's dtype; each
        output is read once into a new array (a host sync)."""
        if self._plan is None and lib.teeny_graph_node_count(self._open()) > 0:  # 0: every output folded
            self._plan = self._compile(training=False, loss=self._out_nodes[0] if self._out_nodes else -1)
            if self._labels is not None:  # the loss node is in the graph now: give its labels a value
                self._write_labels(self._plan, np.zeros(self.batch, np.int32))
        self._write(self._plan, feeds)
        if self._plan:
            self.ctx.check(lib.teeny_plan_forward(self._plan))
        out = {}
        for i, v in enumerate(self.outputs):
            a = out[v.name] = np.empty(v.shape, np.float32)
            self.ctx.check(lib.teeny_onnx_output_read(self._m, self._plan, i, a.ctypes.data, a.size))
        return out

    def _compile(self, training, loss):
        h = handle()
        pp = PlanParams(self.batch, int(training), loss, 1)
        self.ctx.check(lib.teeny_graph_compile(self._g, byref(pp), byref(h)))
        return h.value

    def _tensor(self, plan, node):
        t = handle()
        self.ctx.check(lib.teeny_plan_tensor(plan, node, byref(t)))
        return t.value

    def _write(self, plan, feeds):
        names = {v.name for v in self.inputs}
        extra = [k for k in feeds if k not in names]
        if extra:
            raise TeenyError(ERR_ARG, "no run-time input named %s; the model takes %s (constants go to "
                             "Session(..., constants=))" % (", ".join(extra), sorted(names)))
        for v, node in zip(self.inputs, self._in_nodes):
            if v.name not in feeds:
                raise TeenyError(ERR_ARG, "input %s: no value given" % v.name)
            a = np.ascontiguousarray(feeds[v.name], v.dtype)
            if a.shape != v.shape:
                raise TeenyError(ERR_SHAPE, "input %s: shape %s, the model takes %s (batch %d; another batch "
                                 "needs Session(..., batch=N))" % (v.name, a.shape, v.shape, self.batch))
            write = lib.teeny_tensor_write_i32 if v.dtype == np.int32 else lib.teeny_tensor_write
            self.ctx.check(write(self._tensor(plan, node), a.ctypes.data, a.size))

    def _write_labels(self, plan, labels):
        a = np.ascontiguousarray(labels, np.int32)
        if a.shape != (self.batch,):
            raise TeenyError(ERR_SHAPE, "labels: shape %s, want (%d,)" % (a.shape, self.batch))
        self.ctx.check(lib.teeny_tensor_write_i32(self._tensor(plan, self._labels), a.ctypes.data, a.size))

    # ---- fine-tuning ----

    def parameter_names(self):
        """The parameters' names (the ONNX initializers'), in graph order."""
        names = []
        for i in range(lib.teeny_graph_param_count(self._open())):
            name = c_char_p()
            self.ctx.check(lib.teeny_graph_param(self._g, i, byref(name), None, None))
            names.append(name.value.decode())
        return names

    def parameters(self):
        """{name: float32 array} of every parameter (ONNX initializer
        names), read from the device."""
        out, g = {}, self._open()
        for i in range(lib.teeny_graph_param_count(g)):
            name, t = c_char_p(), c_void_p()
            self.ctx.check(lib.teeny_graph_param(g, i, byref(name), byref(t), None))
            shape = [lib.teeny_tensor_dim(t, k) for k in range(lib.teeny_tensor_ndim(t))]
            a = out[name.value.decode()] = np.empty(shape, np.float32)
            self.ctx.check(lib.teeny_tensor_read(t, a.ctypes.data, a.size))
        return out

    def train_setup(self, optimizer="sgd", lr=0.01, momentum=0.0, weight_decay=0.0, freeze=()):
        """Prepare fine-tuning (train_step calls it with these defaults
        when it was not called): a softmax cross-entropy on the first
        output (class scores [B, K], or [B, K, ...] flattened) against int32
        labels [B], a training plan (batch norm with batch statistics), and
        an optimizer ("sgd", "adam" or "adamw", PyTorch's semantics) over
        every parameter whose name starts with none of the freeze prefixes.
        Once per Session: after a failure it still runs inference, and a new
        Session starts training over."""
        self._open()
        if self._labels is not None:
            raise TeenyError(ERR_STATE, "train_setup: training is already set up (or its setup failed: "
                             "a new Session starts over)")
        if not self._out_nodes or self._out_nodes[0] < 0 or len(self.outputs[0].shape) < 2:
            raise TeenyError(ERR_ARG, "train_setup: the first output must be class scores [B, K, ...]")
        if optimizer not in OPTIM_KINDS:
            raise TeenyError(ERR_ARG, "train_setup: optimizer %r is not one of %s" % (optimizer, list(OPTIM_KINDS)))
        freeze = (freeze,) if isinstance(freeze, str) else tuple(freeze)
        lib.teeny_plan_destroy(self._plan)  # recompiled by run() over the graph with the loss
        self._plan = None
        g, chk = self._g, self.ctx.check
        logits, labels, loss = c_int32(self._out_nodes[0]), c_int32(), c_int32()
        if len(self.outputs[0].shape) > 2:
            chk(lib.teeny_graph_flatten(g, b"train.flatten", logits, byref(logits)))
        chk(lib.teeny_graph_mark_output(g, logits))
        chk(lib.teeny_graph_labels(g, b"train.labels", byref(labels)))
        self._labels = labels.value
        chk(lib.teeny_graph_softmax_cross_entropy(g, b"train.loss", logits, labels, byref(loss)))
        for name in self.parameter_names():
            if any(name.startswith(p) for p in freeze):
                chk(lib.teeny_onnx_set_trainable(self._m, name.encode(), 0))
        plan = self._compile(training=True, loss=loss.value)
        params, grads = [], []
        for i in range(lib.teeny_graph_param_count(g)):
            p, gr = c_void_p(), c_void_p()
            chk(lib.teeny_graph_param(g, i, None, byref(p), byref(gr)))
            if gr.value:  # frozen parameters have no gradient
                params.append(p.value)
                grads.append(gr.value)
        op = OptimParams(OPTIM_KINDS[optimizer], lr, momentum, 0.0, weight_decay, 0, 0.9, 0.999, 1e-8, 0.0)
        h = handle()
        try:
            chk(lib.teeny_optimizer_create(self.ctx._h, byref(op), len(params), (c_void_p * len(params))(*params),
                                           (c_void_p * len(grads))(*grads), byref(h)))
        except BaseException:
            lib.teeny_plan_destroy(plan)
            raise
        self._trainer = _Trainer(plan, h.value, lr)

    def train_step(self, feeds, labels, lr=None):
        """One step on a batch: forward, backward and the optimizer's update
        (lr: this step's rate; None: train_setup's). labels: class indices
        [B]. Returns the batch's loss before the update (a host sync)."""
        self._open()
        if not self._trainer:
            self.train_setup()
        t = self._trainer
        self._write(t.plan, feeds)
        self._write_labels(t.plan, labels)
        loss, chk = c_float(), self.ctx.check
        chk(lib.teeny_plan_forward(t.plan))
        chk(lib.teeny_plan_backward(t.plan))
        chk(lib.teeny_optimizer_step(t.opt, t.lr if lr is None else lr, -1.0))
        chk(lib.teeny_plan_read_loss(t.plan, byref(loss)))
        return loss.value

    def save(self, path):
        """Write the parameters and batch-norm statistics under their ONNX
        names (and, once training is set up, the optimizer's state) as a
        safetensors checkpoint, crash-safely."""
        opt = self._trainer.opt if self._trainer else None
        self.ctx.check(lib.teeny_graph_save(self._open(), opt, os.fsencode(path), 0, None, None))

    def load(self, path):
        """Read parameters and statistics from a checkpoint save() wrote (or
        a matching PyTorch state_dict in safetensors); the optimizer keeps
        its own state. Checked whole before anything is written."""
        self.ctx.check(lib.teeny_graph_load(self._open(), None, os.fsencode(path)))
