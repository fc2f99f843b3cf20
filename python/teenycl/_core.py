"""Devices, contexts and the eager ops on NumPy arrays."""
import math
from collections import namedtuple
from ctypes import byref, c_int, c_int64, c_void_p, sizeof

import numpy as np

from ._lib import (ACTIVATIONS, ERR_SHAPE, ERR_STATE, Conv2dParams, DeviceInfo, TeenyError, check, handle, lib,
                   shape_array)

Device = namedtuple("Device", "spec name platform vendor version driver is_gpu is_cpu compute_units "
                              "global_mem_bytes local_mem_bytes max_alloc_bytes has_fp64 is_default")
Device.__doc__ = """An OpenCL device as teeny_devices_list reports it. spec
("P:D", platform and device index) is what Context and Session take to
pick it; is_default marks what they pick with device=None."""


def devices():
    """Every OpenCL device of every platform, as a list of Device."""
    count = c_int()
    check(lib.teeny_devices_list(None, 0, byref(count)))
    infos = (DeviceInfo * count.value)()
    for d in infos:
        d.struct_size = sizeof(DeviceInfo)
    check(lib.teeny_devices_list(infos, count.value, byref(count)))
    text = lambda b: b.decode("utf-8", "replace")  # noqa: E731
    return [Device("%d:%d" % (d.platform_index, d.device_index), text(d.device_name), text(d.platform_name),
                   text(d.vendor), text(d.device_version), text(d.driver_version), bool(d.is_gpu),
                   bool(d.is_cpu), d.compute_units, d.global_mem_bytes, d.local_mem_bytes, d.max_alloc_bytes,
                   bool(d.has_fp64), bool(d.is_default)) for d in infos[:count.value]]


class Out:
    """An output argument of Context.call: a tensor of shape (and dtype,
    float32 or int32) created for the call and read back into a new array."""

    def __init__(self, shape, dtype=np.float32):
        self.shape, self.dtype = tuple(int(s) for s in shape), np.dtype(dtype)


class Context:
    """One OpenCL device and its queue (a teeny_ctx). device: a spec as
    teeny_ctx_create takes it ("cpu", "gpu", "pocl", "nvidia", "P:D", part
    of a device name) or None (TEENY_DEVICE, else the first GPU, else the
    first CPU). The eager ops take and return NumPy arrays: each input is
    uploaded once (float32 C-contiguous arrays straight from their
    buffer), each output read once into a new array."""

    def __init__(self, device=None):
        h = handle()
        check(lib.teeny_ctx_create(device.encode() if device else None, byref(h)))
        self._h = h.value

    @property
    def device_name(self):
        return lib.teeny_ctx_device_name(self._h).decode()

    def close(self):
        """Release the device context (close the Sessions on it first);
        also done when the object is collected."""
        if getattr(self, "_h", None):
            lib.teeny_ctx_destroy(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def check(self, status):
        check(status, self._h)

    # ---- tensors ----

    def tensor(self, shape, dtype=np.float32):
        """A new device tensor (a handle the caller destroys)."""
        if not self._h:
            raise TeenyError(ERR_STATE, "the context is closed")
        h = handle()
        create = lib.teeny_tensor_create_i32 if np.dtype(dtype) == np.int32 else lib.teeny_tensor_create
        self.check(create(self._h, len(shape), shape_array(shape), byref(h)))
        return h.value

    def upload(self, array):
        """array as a new device tensor: float arrays as float32, integer
        ones as int32 (labels, indices). No host copy when the array is
        already C-contiguous of that type."""
        a = np.asarray(array)
        a = np.ascontiguousarray(a, np.int32 if a.dtype.kind in "iub" else np.float32)
        t = self.tensor(a.shape or (1,), a.dtype)
        write = lib.teeny_tensor_write_i32 if a.dtype == np.int32 else lib.teeny_tensor_write
        try:
            self.check(write(t, a.ctypes.data, a.size))
        except BaseException:
            lib.teeny_tensor_destroy(t)
            raise
        return t

    def download(self, t, shape, dtype=np.float32):
        """Host sync: tensor t into a new array of shape."""
        out = np.empty(shape, dtype)
        read = lib.teeny_tensor_read_i32 if out.dtype == np.int32 else lib.teeny_tensor_read
        self.check(read(t, out.ctypes.data, out.size))
        return out

    def call(self, name, *args):
        """Call the eager function teeny_<name>(ctx, *args): NumPy arrays
        become uploaded tensors, Out(shape) new output tensors, None NULL;
        anything else (a float, byref(params)) passes as it is. Returns the
        outputs' arrays (one, or a tuple), after a host sync."""
        made, outs, cargs = [], [], []
        try:
            for a in args:
                if isinstance(a, Out):
                    made.append(self.tensor(a.shape, a.dtype))
                    outs.append((made[-1], a))
                elif isinstance(a, (np.ndarray, list, tuple)):
                    made.append(self.upload(a))
                else:
                    cargs.append(a)
                    continue
                cargs.append(c_void_p(made[-1]))
            self.check(getattr(lib, "teeny_" + name)(self._h, *cargs))
            res = tuple(self.download(t, o.shape, o.dtype) for t, o in outs)
        finally:
            for t in made:
                lib.teeny_tensor_destroy(t)
        return res[0] if len(res) == 1 else res

    # ---- the eager ops: one line each on top of call ----

    def add(self, a, b):
        return self.call("add", a, b, Out(np.shape(a)))

    def mul(self, a, b):
        return self.call("mul", a, b, Out(np.shape(a)))

    def activation(self, x, act="relu"):
        return self.call("activation_forward", ACTIVATIONS[act], x, Out(np.shape(x)))

    def matmul(self, a, b):
        return self.call("matmul", a, b, Out(np.broadcast_shapes(np.shape(a)[:-2], np.shape(b)[:-2])
                                             + (np.shape(a)[-2], np.shape(b)[-1])))

    def linear(self, x, w, bias=None):
        return self.call("linear_forward", x, w, bias, Out((np.shape(x)[0], np.shape(w)[0])))

    def softmax(self, x, axis=-1, log=False):
        return self.call("softmax", axis % np.ndim(x), int(log), x, Out(np.shape(x)))

    def cross_entropy(self, logits, labels):
        return self.call("softmax_cross_entropy_forward", logits, labels, Out((1,)), None)[0]

    def batchnorm(self, x, weight, bias, running_mean, running_var, eps=1e-5):
        """Batch normalization with frozen statistics (inference)."""
        return self.call("batchnorm_forward_infer", x, weight, bias, running_mean, running_var, eps,
                         Out(np.shape(x)))

    def attention(self, q, k, v, scale=None):
        """softmax(scale q k^T) v per matrix: q [BH, Nq, D], k [BH, Nk, D],
        v [BH, Nk, Dv] -> [BH, Nq, Dv]; scale defaults to 1/sqrt(D)."""
        scale = 1.0 / math.sqrt(np.shape(q)[-1]) if scale is None else scale
        return self.call("attention_forward", q, k, v, scale, Out(np.shape(q)[:2] + np.shape(v)[2:]), None)

    def conv2d(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """PyTorch's F.conv2d: x [B, Cin, H, W], w [Cout, Cin/groups, KH, KW];
        stride, padding, dilation an int or an (H, W) pair."""
        if np.ndim(x) != 4 or np.ndim(w) != 4:
            raise TeenyError(ERR_SHAPE, "conv2d: x %s and w %s must both be 4-d" % (np.shape(x), np.shape(w)))
        pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)  # noqa: E731
        p = Conv2dParams(pair(stride), pair(padding), pair(dilation), groups, (0, 0))
        y = (c_int64 * 4)()
        check(lib.teeny_conv2d_output_shape(byref(p), shape_array(np.shape(x)), shape_array(np.shape(w)), y))
        return self.call("conv2d_forward", byref(p), x, w, bias, Out(y))
