"""The Python package against the library it loads: device listing, ONNX
sessions against onnxruntime's stored outputs, errors, fine-tuning, and
the eager ops against NumPy references. Plain unittest, run by make test:

    PYTHONPATH=python python3 python/tests/test_teenycl.py

Prints one line per test and "N passed, M failed"; exits 1 on any failure.
"""
import os
import sys
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))  # this tree's package, whatever is installed
import teenycl  # noqa: E402

MODELS = os.path.join(ROOT, "tests", "onnx")
CTX = None  # one context for every test: kernels build once


def setUpModule():
    global CTX
    CTX = teenycl.Context()


def npy(name):
    return np.load(os.path.join(MODELS, name))


def assert_onnx_close(tc, got, want, what):
    """ONNX's tolerance, as tests/test_onnx.c: |d| <= 1e-7 + 1e-3 |want|."""
    tc.assertEqual(got.shape, want.shape, what)
    bad = ~(np.isfinite(got) & (np.abs(got - want) <= 1e-7 + 1e-3 * np.abs(want)))
    tc.assertFalse(bad.any(), "%s: %d values off, first at %s: got %r, want %r" % (
        what, bad.sum(), np.argwhere(bad)[:1], got[bad][:1], want[bad][:1]))


class Devices(unittest.TestCase):
    def test_list(self):
        devs = teenycl.devices()
        self.assertGreater(len(devs), 0)
        self.assertEqual(sum(d.is_default for d in devs), 1)
        default = next(d for d in devs if d.is_default)
        self.assertEqual(CTX.device_name, default.name)
        self.assertEqual(teenycl.Context(default.spec).device_name, default.name)
        for d in devs:
            self.assertRegex(d.spec, r"^\d+:\d+$")
            self.assertTrue(d.is_gpu or d.is_cpu or d.name)
            self.assertGreater(d.global_mem_bytes, 0)


class Sessions(unittest.TestCase):
    def check_model(self, name, in_names, batch=None):
        feeds = {n: npy("%s.in%d.npy" % (name, i)) for i, n in enumerate(in_names)}
        s = teenycl.Session(os.path.join(MODELS, name + ".onnx"), device=CTX, batch=batch)
        self.assertEqual(sorted(v.name for v in s.inputs), sorted(in_names))
        for v in s.inputs:
            self.assertEqual(v.shape, feeds[v.name].shape)
        out = s.run(feeds)
        self.assertEqual(list(out), [v.name for v in s.outputs])
        for k, v in enumerate(s.outputs):
            self.assertEqual(out[v.name].dtype, np.float32)
            assert_onnx_close(self, out[v.name], npy("%s.out%d.npy" % (name, k)), "%s %s" % (name, v.name))
        return s

    def test_convnet(self):
        s = self.check_model("convnet", ["x"], batch=2)  # the model's batch is symbolic
        self.assertEqual(s.inputs, [teenycl.Value("x", np.float32, (2, 3, 8, 8))])
        self.assertEqual(s.outputs, [teenycl.Value("logits", np.float32, (2, 5))])
        # float64 and non-contiguous inputs are converted, with the same result
        x = npy("convnet.in0.npy")
        xt = np.asfortranarray(x.astype(np.float64))
        np.testing.assert_array_equal(s.run({"x": xt})["logits"], s.run({"x": x})["logits"])

    def test_gemm(self):
        s = self.check_model("gemm", ["x", "xt", "b"])  # fixed shapes: the model's own batch
        self.assertEqual([v.name for v in s.outputs], ["y1", "y2", "y3", "y4", "y5"])


class Errors(unittest.TestCase):
    def test_library_errors(self):
        with self.assertRaises(teenycl.TeenyError) as e:
            teenycl.Session(os.path.join(MODELS, "bad_op.onnx"), device=CTX)
        self.assertEqual(e.exception.name, "TEENY_ERR_UNSUPPORTED")
        self.assertIn('node "my_softplus" (Softplus)', e.exception.message)
        self.assertIn("TEENY_ERR_UNSUPPORTED: ", str(e.exception))
        with self.assertRaises(teenycl.TeenyError) as e:
            teenycl.Session(os.path.join(MODELS, "missing.onnx"), device=CTX)
        self.assertEqual(e.exception.name, "TEENY_ERR_IO")
        self.assertIn("missing.onnx", e.exception.message)
        with self.assertRaises(teenycl.TeenyError) as e:
            teenycl.Context("no-such-device-anywhere")
        self.assertEqual(e.exception.name, "TEENY_ERR_NO_DEVICE")
        self.assertIn(CTX.device_name, e.exception.message)  # the message lists the devices
        with self.assertRaises(teenycl.TeenyError) as e:  # 4 input channels, the weight wants 3
            CTX.conv2d(np.ones((1, 4, 5, 5), np.float32), np.ones((2, 3, 3, 3), np.float32))
        self.assertEqual(e.exception.name, "TEENY_ERR_SHAPE")
        self.assertTrue(e.exception.message)

    def test_feed_errors(self):
        s = teenycl.Session(os.path.join(MODELS, "convnet.onnx"), device=CTX, batch=2)
        x = npy("convnet.in0.npy")
        for feeds, name in (({}, "TEENY_ERR_ARG"), ({"x": x, "y": x}, "TEENY_ERR_ARG"),
                            ({"x": x[:1]}, "TEENY_ERR_SHAPE")):
            with self.assertRaises(teenycl.TeenyError) as e:
                s.run(feeds)
            self.assertEqual(e.exception.name, name)
        self.assertEqual(s.run({"x": x})["logits"].shape, (2, 5))  # still usable


class Training(unittest.TestCase):
    def test_train_step_save_load(self):
        path = os.path.join(MODELS, "convnet.onnx")
        s = teenycl.Session(path, device=CTX, batch=8)
        rng = np.random.default_rng(3)
        x = rng.standard_normal((8, 3, 8, 8)).astype(np.float32)
        y = np.arange(8) % 5
        before = s.parameters()
        s.train_setup(optimizer="sgd", lr=0.05, momentum=0.9, freeze=["conv1."])
        losses = [s.train_step({"x": x}, y) for _ in range(6)]
        self.assertTrue(all(np.isfinite(losses)), losses)
        self.assertLess(losses[-1], losses[0] * 0.9, losses)
        after = s.parameters()
        np.testing.assert_array_equal(after["conv1.weight"], before["conv1.weight"])  # frozen
        self.assertFalse(np.array_equal(after["fc.weight"], before["fc.weight"]))
        with tempfile.TemporaryDirectory() as d:
            ckpt = os.path.join(d, "tuned.safetensors")
            s.save(ckpt)
            fresh = teenycl.Session(path, device=CTX, batch=8)
            fresh.load(ckpt)
            np.testing.assert_array_equal(fresh.parameters()["fc.weight"], after["fc.weight"])
            np.testing.assert_array_equal(fresh.run({"x": x})["logits"], s.run({"x": x})["logits"])


def conv2d_ref(x, w, b, stride, pad, groups):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    (B, _, H, W), (O, Cg, KH, KW) = x.shape, w.shape
    OH, OW, Og = (H - KH) // stride + 1, (W - KW) // stride + 1, O // groups
    y = np.zeros((B, O, OH, OW)) + b[None, :, None, None]
    for kh in range(KH):
        for kw in range(KW):
            patch = x[:, :, kh:kh + stride * (OH - 1) + 1:stride, kw:kw + stride * (OW - 1) + 1:stride]
            for g in range(groups):
                y[:, g * Og:(g + 1) * Og] += np.einsum("bchw,oc->bohw", patch[:, g * Cg:(g + 1) * Cg],
                                                       w[g * Og:(g + 1) * Og, :, kh, kw])
    return y


class EagerOps(unittest.TestCase):
    rng = np.random.default_rng(7)

    def rand(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def test_add(self):
        a, b = self.rand(3, 4, 5), self.rand(3, 4, 5)
        np.testing.assert_allclose(CTX.add(a, b), a + b, rtol=1e-6)

    def test_round_half(self):
        # NumPy's float16 conversion rounds to nearest even and overflows to inf, as the device must: bit for bit
        x = np.concatenate([self.rand(1000) * 3, np.float32([65504, 65519.99, 65520, 2.0 ** -25, 3 * 2.0 ** -25,
                                                             1 + 2.0 ** -11, -(1 + 3 * 2.0 ** -11), 1e-8, -0.0])])
        with np.errstate(over="ignore"):  # 65520 and past: inf, as wanted
            want = x.astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(CTX.activation(x, "round_half").view(np.uint32), want.view(np.uint32))

    def test_conv2d(self):
        x, w, b = self.rand(2, 4, 9, 7), self.rand(6, 2, 3, 3), self.rand(6)
        y = CTX.conv2d(x, w, b, stride=2, padding=1, groups=2)
        np.testing.assert_allclose(y, conv2d_ref(x, w, b, 2, 1, 2), rtol=1e-4, atol=1e-5)

    def test_batchnorm_inference(self):
        x, w, b, m = self.rand(2, 3, 4, 5), self.rand(3), self.rand(3), self.rand(3)
        v = np.abs(self.rand(3)) + 0.5
        want = (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5) * w[:, None, None] + b[:, None, None]
        np.testing.assert_allclose(CTX.batchnorm(x, w, b, m, v), want, rtol=1e-4, atol=1e-5)

    def test_attention(self):
        q, k, v = self.rand(3, 5, 16), self.rand(3, 7, 16), self.rand(3, 7, 8)
        s = q.astype(np.float64) @ k.transpose(0, 2, 1) / 4.0
        p = np.exp(s - s.max(-1, keepdims=True))
        want = (p / p.sum(-1, keepdims=True)) @ v
        np.testing.assert_allclose(CTX.attention(q, k, v), want, rtol=1e-4, atol=1e-5)

    def test_matmul_and_cross_entropy(self):
        a, b = self.rand(2, 3, 4), self.rand(4, 5)
        np.testing.assert_allclose(CTX.matmul(a, b), a @ b, rtol=1e-4, atol=1e-5)
        logits, labels = self.rand(4, 5), np.array([0, 4, 2, 1])
        lse = np.log(np.exp(logits.astype(np.float64)).sum(1))
        want = np.mean(lse - logits[np.arange(4), labels])
        self.assertAlmostEqual(float(CTX.cross_entropy(logits, labels)), want, places=5)


if __name__ == "__main__":
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(
        unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__]))
    failed = len(result.failures) + len(result.errors)  # errors include a failed setUpModule
    print("python tests: %d passed, %d failed" % (max(result.testsRun - failed, 0), failed))
    sys.exit(1 if failed or not result.testsRun else 0)
