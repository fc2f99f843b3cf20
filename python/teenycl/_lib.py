"""Finding libteenycl, the C declarations the package uses, and errors.

Everything here mirrors include/teenycl.h and include/teenycl_onnx.h: the
structs are laid out field for field as the headers declare them, and
every function the package calls has its argument and result types set
(ctypes would otherwise pass and return C int, truncating pointers).
"""
import ctypes
import ctypes.util
import os
from ctypes import POINTER, Structure, c_char, c_char_p, c_float, c_int, c_int32, c_int64, c_size_t
from ctypes import c_uint, c_uint64, c_void_p

# The ABI this package is written against (teenycl.h's TEENY_VERSION_*).
# Before 1.0 a minor version may append fields to parameter structs, so
# the soname, and this check, carry the minor version too.
ABI = (0, 2)
SONAME = "libteenycl.so.%d.%d" % ABI


def _candidates():
    """Where to look, in order: $TEENYCL_LIBRARY, the build tree next to
    this source tree (python/teenycl -> build/), the system's library
    path (ldconfig, what `make install` fills), then the bare soname."""
    env = os.environ.get("TEENYCL_LIBRARY")
    if env:
        return [env]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = ctypes.util.find_library("teenycl")
    return [os.path.join(root, "build", SONAME)] + ([found] if found else []) + [SONAME]


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (no such file)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        lib.teeny_version.restype = c_uint
        v = lib.teeny_version()
        if (v // 10000, v // 100 % 100) != ABI:
            tried.append("%s (version %d.%d.%d; this package needs %d.%d.x)"
                         % (path, v // 10000, v // 100 % 100, v % 100, ABI[0], ABI[1]))
            continue
        return lib, path
    raise ImportError("teenycl: no usable libteenycl (build it with `make`, install it with `make install`, "
                      "or set TEENYCL_LIBRARY to its path); tried: " + "; ".join(tried))


lib, library_path = _load()

# ---- the structs ----------------------------------------------------------


class DeviceInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("platform_index", c_int), ("device_index", c_int),
                ("platform_name", c_char * 128), ("device_name", c_char * 128), ("vendor", c_char * 128),
                ("device_version", c_char * 64), ("driver_version", c_char * 64),
                ("opencl_c_version", c_char * 64), ("is_gpu", c_int), ("is_cpu", c_int),
                ("compute_units", c_uint), ("max_work_group_size", c_size_t), ("local_mem_bytes", c_uint64),
                ("global_mem_bytes", c_uint64), ("max_alloc_bytes", c_uint64), ("has_fp64", c_int),
                ("has_subgroups", c_int), ("has_nvidia_ptx", c_int), ("is_default", c_int)]


class Conv2dParams(Structure):
    _fields_ = [("stride", c_int * 2), ("pad", c_int * 2), ("dilation", c_int * 2), ("groups", c_int),
                ("pad_end_extra", c_int * 2)]


class OptimParams(Structure):
    _fields_ = [("kind", c_int), ("lr", c_float), ("momentum", c_float), ("dampening", c_float),
                ("weight_decay", c_float), ("nesterov", c_int), ("beta1", c_float), ("beta2", c_float),
                ("eps", c_float), ("max_grad_norm", c_float)]


class OnnxFeed(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("ndim", c_int), ("shape", POINTER(c_int64)),
                ("data", c_void_p)]


class OnnxParams(Structure):
    _fields_ = [("batch", c_int64), ("freeze", c_int), ("base_dir", c_char_p), ("n_feeds", c_int),
                ("feeds", POINTER(OnnxFeed))]


class PlanParams(Structure):
    _fields_ = [("batch", c_int64), ("training", c_int), ("loss", c_int32), ("reuse_memory", c_int)]


OPTIM_KINDS = {"sgd": 0, "adam": 1, "adamw": 2}          # teeny_optim_kind
ONNX_FLOAT, ONNX_INT32, ONNX_INT64 = 1, 6, 7             # teeny_onnx_dtype
ERR_ARG, ERR_SHAPE, ERR_STATE = 1, 2, 11                 # teeny_status codes raised from Python
ACTIVATIONS = {"relu": 1, "silu": 2, "sigmoid": 3, "tanh": 4, "hardsigmoid": 5, "hardswish": 6,
               "leaky_relu": 7, "gelu": 8, "gelu_tanh": 9, "clip": 10, "mish": 11, "erf": 12,
               "round_half": 13}  # teeny_act

# ---- the functions --------------------------------------------------------

H = c_void_p           # every handle: teeny_ctx *, teeny_tensor *, teeny_graph *, ...
P = c_void_p           # a pointer to host data or to a parameter struct
PH = POINTER(c_void_p)  # an out-parameter handle
I64P = POINTER(c_int64)
F, I, ST = c_float, c_int, c_int  # ST: teeny_status

_PROTOS = {
    "teeny_version_string": (c_char_p, []),
    "teeny_status_name": (c_char_p, [ST]),
    "teeny_last_error": (c_char_p, [H]),
    "teeny_devices_list": (ST, [P, I, POINTER(c_int)]),
    "teeny_ctx_create": (ST, [c_char_p, PH]),
    "teeny_ctx_destroy": (None, [H]),
    "teeny_ctx_device_name": (c_char_p, [H]),
    "teeny_tensor_create": (ST, [H, I, I64P, PH]),
    "teeny_tensor_create_i32": (ST, [H, I, I64P, PH]),
    "teeny_tensor_destroy": (None, [H]),
    "teeny_tensor_write": (ST, [H, P, c_size_t]),
    "teeny_tensor_read": (ST, [H, P, c_size_t]),
    "teeny_tensor_write_i32": (ST, [H, P, c_size_t]),
    "teeny_tensor_read_i32": (ST, [H, P, c_size_t]),
    "teeny_tensor_ndim": (I, [H]),
    "teeny_tensor_dim": (c_int64, [H, I]),
    "teeny_graph_node_count": (I, [H]),
    "teeny_graph_node_info": (ST, [H, c_int32, POINTER(c_char_p), POINTER(c_int), I64P]),
    "teeny_graph_mark_output": (ST, [H, c_int32]),
    "teeny_graph_labels": (ST, [H, c_char_p, POINTER(c_int32)]),
    "teeny_graph_flatten": (ST, [H, c_char_p, c_int32, POINTER(c_int32)]),
    "teeny_graph_softmax_cross_entropy": (ST, [H, c_char_p, c_int32, c_int32, POINTER(c_int32)]),
    "teeny_graph_param_count": (I, [H]),
    "teeny_graph_param": (ST, [H, I, POINTER(c_char_p), PH, PH]),
    "teeny_graph_compile": (ST, [H, P, PH]),
    "teeny_graph_save": (ST, [H, H, c_char_p, I, P, P]),
    "teeny_graph_load": (ST, [H, H, c_char_p]),
    "teeny_plan_destroy": (None, [H]),
    "teeny_plan_tensor": (ST, [H, c_int32, PH]),
    "teeny_plan_forward": (ST, [H]),
    "teeny_plan_backward": (ST, [H]),
    "teeny_plan_read_loss": (ST, [H, POINTER(c_float)]),
    "teeny_optimizer_create": (ST, [H, P, I, PH, PH, PH]),
    "teeny_optimizer_destroy": (None, [H]),
    "teeny_optimizer_step": (ST, [H, F, F]),
    "teeny_onnx_load": (ST, [H, c_char_p, P, PH]),
    "teeny_onnx_destroy": (None, [H]),
    "teeny_onnx_graph": (H, [H]),
    "teeny_onnx_batch": (c_int64, [H]),
    "teeny_onnx_input_count": (I, [H]),
    "teeny_onnx_input": (ST, [H, I, POINTER(c_char_p), POINTER(c_int32), POINTER(c_int)]),
    "teeny_onnx_output_count": (I, [H]),
    "teeny_onnx_output": (ST, [H, I, POINTER(c_char_p), POINTER(c_int32), POINTER(c_int), I64P]),
    "teeny_onnx_output_read": (ST, [H, H, I, P, c_size_t]),
    "teeny_onnx_set_trainable": (ST, [H, c_char_p, I]),
    # the eager ops Context wraps (teenycl.h): tensors are H, parameters as declared
    "teeny_conv2d_output_shape": (ST, [P, I64P, I64P, I64P]),
    "teeny_conv2d_forward": (ST, [H, P, H, H, H, H]),
    "teeny_batchnorm_forward_infer": (ST, [H, H, H, H, H, H, F, H]),
    "teeny_attention_forward": (ST, [H, H, H, H, F, H, H]),
    "teeny_add": (ST, [H, H, H, H]),
    "teeny_mul": (ST, [H, H, H, H]),
    "teeny_activation_forward": (ST, [H, I, H, H]),
    "teeny_matmul": (ST, [H, H, H, H]),
    "teeny_linear_forward": (ST, [H, H, H, H, H]),
    "teeny_softmax": (ST, [H, I, I, H, H]),
    "teeny_softmax_cross_entropy_forward": (ST, [H, H, H, H, H]),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args

# ---- errors ---------------------------------------------------------------


class TeenyError(RuntimeError):
    """A call into libteenycl failed. status is the teeny_status code (an
    int), name its name ("TEENY_ERR_SHAPE"), message the library's detail
    (teeny_last_error: which argument, which shapes, which OpenCL call).
    What the package checks itself before calling (feeds, a closed
    session) is reported the same way, under the status the library uses
    for it."""

    __module__ = "teenycl"

    def __init__(self, status, message):
        self.status = status
        self.name = lib.teeny_status_name(status).decode()
        self.message = message
        super().__init__("%s: %s" % (self.name, message))


def check(status, ctx=None):
    """Raise TeenyError for a failed status, with ctx's last error (ctx
    None: the calling thread's context-less one)."""
    if status != 0:
        raise TeenyError(status, (lib.teeny_last_error(ctx) or b"").decode("utf-8", "replace"))


def shape_array(shape):
    return (c_int64 * max(len(shape), 1))(*shape)


def handle():
    """An out-parameter for a handle: pass byref(h), read h.value (None
    for NULL)."""
    return c_void_p()

