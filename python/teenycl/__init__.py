"""teenycl from Python: run and fine-tune ONNX models, and call the eager
ops, on any OpenCL device, with NumPy arrays in and out.

    import numpy as np, teenycl

    print([d.name for d in teenycl.devices()])
    s = teenycl.Session("tests/onnx/convnet.onnx", batch=8)  # device="gpu", "nvidia", "0:1", ...
    print(s.inputs, s.outputs)
    x = np.random.default_rng(0).standard_normal((8, 3, 8, 8), np.float32)
    y = np.arange(8) % 5                                      # class labels
    print(s.run({"x": x})["logits"].argmax(1))
    s.train_setup(optimizer="adamw", lr=1e-2, freeze=["conv1."])
    print([round(s.train_step({"x": x}, y), 4) for _ in range(5)])
    s.save("convnet-tuned.safetensors")                      # under the ONNX names
    print(s.ctx.conv2d(x, np.ones((4, 3, 3, 3), np.float32), padding=1).shape)

Errors raise TeenyError, carrying the status name ("TEENY_ERR_SHAPE") and
the library's message (teeny_last_error: the argument, the shapes, the
OpenCL call or the ONNX node).

The binding is ctypes over the C library's public API (include/teenycl.h,
include/teenycl_onnx.h): ctypes is in the standard library, so the
package needs no compiler, no build step and nothing but NumPy, and it
loads the same libteenycl.so the C programs use. The library is found
through $TEENYCL_LIBRARY, else the build/ directory of the source tree
this package sits in (`make` builds it there), else the system's library
path (`make install`), by its soname libteenycl.so.0.2. NumPy arrays
reach the device without extra copies: the library reads a float32
C-contiguous array's own buffer, and results are read into new arrays.
"""
from ._lib import TeenyError, lib, library_path
from ._core import Context, Device, Out, devices
from ._session import Session, Value

__version__ = lib.teeny_version_string().decode()
__all__ = ["Context", "Device", "Out", "Session", "TeenyError", "Value", "devices", "library_path"]
