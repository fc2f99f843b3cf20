#!/usr/bin/env python3
"""Export real conv nets to ONNX and check teenycl's import of them against
onnxruntime (issue 18, "real models, end to end").

Needs torch and torchvision (PyPI; the CPU build is enough), onnx and
onnxruntime (PyPI), numpy, and for YOLO11n the `ultralytics` package (PyPI;
the model is built from its yaml, nothing is downloaded). None of them is a
dependency of the build or of `make test`; this script is run by hand:

    make all && python3 tools/check-models.py [--models resnet18,mobilenet_v3_small,yolo11n]
        [--batch 2] [--size 224] [--device SPEC] [--workdir build/models]
        [--time K [--threads N] [--torch-device cpu|cuda]]

For each model, with random weights from a fixed seed, in eval mode: export
to ONNX (opset 17, TorchScript exporter, a fixed batch), list the nodes
`teeny-info --onnx` reports unsupported, feed the same seeded input to
`build/teeny-run` and to onnxruntime's CPU provider, and compare every
output: max abs difference, normalized RMS (rms(teeny - ort) / rms(ort)),
and element by element |teeny - ort| <= rtol |ort| + atol max|ort| with
rtol 1e-3 (ONNX's backend-test rtol) and atol 1e-4 taken relative to the
output's largest magnitude; the normalized RMS must also be <= 1e-4 (issue
18's bound). ONNX's absolute 1e-7 is for single nodes: through tens of
convolutions, fp32 rounding in different summation orders leaves relative
differences of ~1e-6 to 1e-5 (PyTorch's own CPU output differs from
onnxruntime's by as much; the script prints that nrms as the noise floor),
and YOLO's box decoding (anchor - distance, times a stride of up to 32)
cancels outputs of magnitude ~500 to near zero, whose error then scales with
the terms, not the result: an absolute atol of 1e-4 fails there on rounding
alone (at batch 1, teenycl's output against PyTorch's fails it on 2 such
elements, against onnxruntime's on 3). A real error (a wrong tap, pad, scale or layout) moves the
nrms to 1e-2 or more.

With --time K, each model that matches is then timed, K runs each after a
warm-up, the median printed: teenycl's forward (`teeny-run --repeat K --json`,
inputs already on the device, to the end of the queue), onnxruntime's CPU
provider (`sess.run`, N intra-op threads, default all cores) and PyTorch
eager in eval mode under torch.no_grad() on --torch-device (default cuda
when available), input already there, synchronized, once with PyTorch's
defaults (cuDNN may use TF32) and once with TF32 off (strict fp32, as
teenycl computes).

Before export, batch norm's running statistics are set from a few random
batches (calibrate()), so activations stay of order one through the net.

The transformers (issue 42: their exports check shapes with Shape ->
Gather -> Equal/Mod -> Where, folded at import) are narrowed to run in
seconds on PoCL, at 64 x 64 whatever --size says: vit_b_16_narrow is
torchvision's VisionTransformer (vit_b_16's class) with 2 layers, 2 heads,
width 64, MLP 128, patch 16 (its head, zero at init, drawn at random);
deit_tiny_narrow is timm's deit_tiny_patch16_224 (`pip install timm`) with
depth 2, width 64, 2 heads, 10 classes; transformer_encoder is
nn.TransformerEncoder (2 layers, d_model 32, 2 heads, batch_first) over
[batch, 5, 32] with src_key_padding_mask a second graph input (bool; odd
rows pad their last two positions), fed to teeny-run as a bool .npy (folded at
import: the mask is a constant of the plan).

poolformer_s12_narrow (issue 42: GroupNorm(1, C)) is timm's MetaFormer with
poolformer_s12's depths and options at widths 32, 64, 96, 128, 10 classes,
at 64 x 64; its layer scales (1e-5 at init) drawn in [0.5, 1] and its norms'
weights and biases around 1 and 0, so the blocks and their affines reach
the output. The TorchScript exporter writes each GroupNorm as Reshape ->
InstanceNormalization (Constant ones and zeros) -> Reshape -> Mul -> Add;
the dynamo exporter at --opset 21 (`--exporter dynamo --opset 21`) as
GroupNormalization.

swin_t_narrow, maxvit_t_narrow and ghostnetv2_narrow (issue 42) are at
64 x 64, 10 classes. swin_t_narrow is torchvision's SwinTransformer with
swin_t's patch 4 and depths [2, 2, 2, 2], width 32, heads [1, 2, 4, 8],
window 4 (so the first two stages shift their windows and build the
attention mask with ScatterND, folded at import; the [B, H/w, w, W/w, w, C]
Reshape -> Transpose -> Reshape of the windows merges to a rank-4
transpose). maxvit_t_narrow is torchvision's MaxVit with one layer per
stage, widths 16, 32, 48, 64, stem 16, head dim 8, partition 2 (its grid
partition's (0, 2, 4, 3, 5, 1) permutation of a rank-6 value runs as two
transposes of merged rank <= 5; its relative attention is Einsum).
ghostnetv2_narrow is timm's ghostnetv2_100 at width 0.5 (its DFC attention
takes Shape of a Sigmoid's output). The last two have batch norm,
calibrated as the conv nets.

Exit status: 0 when every model imports and matches, 1 otherwise (an import
failure, a run failure or a mismatch), 2 when a required package is missing.
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("YOLO_OFFLINE", "1")  # ultralytics: no update checks
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRANSFORMERS = ("vit_b_16_narrow", "deit_tiny_narrow", "transformer_encoder")
NARROW = TRANSFORMERS + ("poolformer_s12_narrow", "swin_t_narrow")  # at 64 x 64, no batch norm to calibrate
NARROW_BN = ("maxvit_t_narrow", "ghostnetv2_narrow")  # at 64 x 64, with batch norm (calibrated)
MODELS = ("resnet18", "mobilenet_v3_small", "yolo11n") + NARROW + NARROW_BN


def build_model(name):
    import torch
    if name == "yolo11n":
        from ultralytics import YOLO  # builds from the yaml shipped in the package; no download
        model = YOLO("yolo11n.yaml").model
        model.fuse = lambda *a, **k: model  # keep the exported graph as built
        for m in model.modules():  # the export form of the detect head (one tensor out)
            if type(m).__name__ == "Detect":
                m.export = True
                m.format = "onnx"
        return model.float().eval()
    if name == "vit_b_16_narrow":
        from torchvision.models.vision_transformer import VisionTransformer
        model = VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=2, hidden_dim=64,
                                  mlp_dim=128)
        torch.nn.init.normal_(model.heads.head.weight, std=0.1)  # zero at init: the output would be all zeros
        return model.eval()
    if name == "deit_tiny_narrow":
        import timm
        return timm.create_model("deit_tiny_patch16_224", pretrained=False, img_size=64, embed_dim=64, depth=2,
                                 num_heads=2, num_classes=10).eval()
    if name == "poolformer_s12_narrow":
        import timm  # noqa: F401  (MetaFormer is timm's)
        from timm.models.metaformer import GroupNorm1, MetaFormer
        model = MetaFormer(depths=[2, 2, 6, 2], dims=[32, 64, 96, 128], downsample_norm=None, mlp_act=torch.nn.GELU,
                           mlp_bias=True, norm_layers=GroupNorm1, layer_scale_init_values=1e-5,
                           res_scale_init_values=None, use_mlp_head=False, num_classes=10)  # poolformer_s12's
        with torch.no_grad():  # at init the blocks (layer scale 1e-5) barely reach the output, the norms are 1, 0
            for pname, p in model.named_parameters():
                if "layer_scale" in pname:
                    p.uniform_(0.5, 1.0)
                elif ".norm" in pname:
                    p.normal_(1.0 if pname.endswith("weight") else 0.0, 0.2)
        return model.eval()
    if name == "swin_t_narrow":
        from torchvision.models.swin_transformer import SwinTransformer
        model = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8],
                                window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10)
        return model.eval()
    if name == "maxvit_t_narrow":
        from torchvision.models.maxvit import MaxVit
        return MaxVit(input_size=(64, 64), stem_channels=16, partition_size=2, block_channels=[16, 32, 48, 64],
                      block_layers=[1, 1, 1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10).eval()
    if name == "ghostnetv2_narrow":
        from timm.models.ghostnet import _create_ghostnet  # ghostnetv2_100's blocks at half width
        return _create_ghostnet("ghostnetv2_100", width=0.5, pretrained=False, version="v2", num_classes=10).eval()
    if name == "transformer_encoder":
        layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=2, dim_feedforward=64, batch_first=True)
        return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    import torchvision
    return getattr(torchvision.models, name)(weights=None).eval()


def calibrate(model, batch, size, seed):
    """Set every batch norm's running statistics to those of random inputs
    (cumulative average over a few batches), as training would: without it,
    random weights with the default statistics (mean 0, variance 1) shrink
    or grow the activations layer after layer (MobileNetV3-small's logits
    come out near 1e-9), which a comparison cannot see through."""
    import torch
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for i in range(4):
            model(torch.from_numpy(make_input(batch, size, seed + 1 + i)))
    model.eval()


def export(name, path, batch, size, seed, calib, exporter="torchscript", opset=17, dynamic=False):
    import torch
    torch.manual_seed(seed)
    model = build_model(name)
    if calib and name not in NARROW:  # no batch norm there
        calibrate(model, batch, 64 if name in NARROW_BN else size, seed)
    feeds = make_inputs(name, batch, size, seed)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    if name == "transformer_encoder":
        args = (args[0], None, args[1])  # (src, mask, src_key_padding_mask)
    # under no_grad, nn.MultiheadAttention's fast path (aten::_native_multi_head_attention) has no ONNX form
    with torch.no_grad() if name not in TRANSFORMERS else contextlib.nullcontext():
        out = model(*args)  # also sets up the Detect head's anchors
        if exporter == "dynamo":  # torch.export-based (PyTorch >= 2.9's default; needs onnxscript)
            kw = {"dynamo": True, "external_data": False}
        else:
            kw = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
            kw["do_constant_folding"] = True
            if dynamic:  # a symbolic batch: teeny-run gets --batch, the importer folds the shape arithmetic
                kw["dynamic_axes"] = {k: {0: "N"} for k in feeds}
        torch.onnx.export(model, args, path, opset_version=opset, input_names=list(feeds), **kw)
    out = out if isinstance(out, (list, tuple)) else [out]
    return model, args, [o.detach().numpy() for o in out if isinstance(o, torch.Tensor)]


def make_input(batch, size, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, 3, size, size)).astype(np.float32)


def make_inputs(name, batch, size, seed):
    """The model's graph inputs by name: an image batch, or for
    transformer_encoder the sequence and its bool padding mask."""
    if name == "transformer_encoder":
        src = np.random.default_rng(seed).standard_normal((batch, 5, 32)).astype(np.float32)
        mask = np.zeros((batch, 5), dtype=bool)
        mask[1::2, 3:] = True  # odd rows: the last two positions are padding
        return {"src": src, "src_key_padding_mask": mask}
    return {"input": make_input(batch, 64 if name in NARROW + NARROW_BN else size, seed)}


def unsupported(info, path, device):
    cmd = [info, "--onnx", path] + (["--device", device] if device else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    text = out.stdout + out.stderr
    bad = [line.strip() for line in text.splitlines()  # the causes, not the nodes downstream of them
           if "UNSUPPORTED" in line and "comes from a node that was not imported" not in line]
    return out.returncode, bad, text


def nrms_of(diff, want):
    """rms(diff) / rms(want), in float64."""
    den = float(np.sqrt(np.mean(np.asarray(want, np.float64) ** 2))) if want.size else 0.0
    return float(np.sqrt(np.mean(np.asarray(diff, np.float64) ** 2))) / max(den, 1e-30) if diff.size else 0.0


def check(name, args):
    import onnx
    import onnxruntime as ort
    path = os.path.join(args.workdir, name + ".onnx")
    t0 = time.time()
    model_pt, torch_args, torch_out = export(name, path, args.batch, args.size, args.seed, not args.no_calibrate,
                       args.exporter, args.opset, args.dynamic_batch)
    model = onnx.load(path)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"== {name}: exported in {time.time() - t0:.1f} s, {len(model.graph.node)} nodes, "
          f"ops: {' '.join(ops)}", flush=True)
    row = {"model": name, "ops": ops, "nodes": len(model.graph.node), "imported": False,
           "max_abs": None, "nrms": None, "ok": False}

    rc, bad, text = unsupported(args.teeny_info, path, args.device)
    for line in bad:
        print("  teeny-info:", line)
    summary = [line for line in text.splitlines() if " nodes supported" in line]
    print("  teeny-info:", summary[-1] if summary else text.rstrip())

    feeds = make_inputs(name, args.batch, args.size, args.seed)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ref = dict(zip(names, sess.run(None, feeds)))

    out_dir = os.path.join(args.workdir, name + ".out")
    os.makedirs(out_dir, exist_ok=True)
    cmd = [args.teeny_run, path, "--output-dir", out_dir, "--json"]
    for in_name, value in feeds.items():  # as declared: teeny-run checks a bool input gets a bool .npy
        in_path = os.path.join(args.workdir, f"{name}.{in_name}.npy")
        np.save(in_path, value)
        cmd += ["--input", f"{in_name}={in_path}"]
    if args.device:
        cmd += ["--device", args.device]
    if args.dynamic_batch:
        cmd += ["--batch", str(args.batch)]
    t0 = time.time()
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"  teeny-run failed ({run.returncode}): {(run.stderr or run.stdout).strip()}")
        row["error"] = (run.stderr or run.stdout).strip()
        return row
    row["imported"] = True
    print(f"  teeny-run: {time.time() - t0:.1f} s")
    files = {o["name"]: o["file"] for o in json.loads(run.stdout)["outputs"]}  # names made safe file names
    ok = True
    worst_abs, worst_nrms, torch_nrms = 0.0, 0.0, None
    if len(torch_out) == len(names):  # the noise floor: PyTorch's CPU output against onnxruntime's
        torch_nrms = max(nrms_of(t.astype(np.float64).reshape(ref[n].shape) - ref[n], ref[n])
                         for t, n in zip(torch_out, names))
    for out_name in names:
        want = ref[out_name].astype(np.float64)
        got = np.load(os.path.join(out_dir, files[out_name])).astype(np.float64)
        if got.size != want.size:
            print(f"  {out_name}: {got.shape} from teenycl, {want.shape} from onnxruntime")
            ok = False
            continue
        got = got.reshape(want.shape)
        diff = np.abs(got - want)
        max_abs = float(np.max(diff)) if diff.size else 0.0
        nrms = nrms_of(diff, want)
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        close = bool(np.all(np.isfinite(got))) and bool(np.all(diff <= args.rtol * np.abs(want) + args.atol * scale))
        good = close and nrms <= args.nrms
        print(f"  {out_name} {list(want.shape)}: max abs {max_abs:.3g}, nrms {nrms:.3g}, "
              f"max |ref| {float(np.max(np.abs(want))):.3g}: {'ok' if good else 'MISMATCH'}")
        worst_abs, worst_nrms = max(worst_abs, max_abs), max(worst_nrms, nrms)
        ok = ok and good
    if torch_nrms is not None:
        print(f"  PyTorch CPU against onnxruntime: nrms {torch_nrms:.3g}")
    row.update(max_abs=worst_abs, nrms=worst_nrms, torch_nrms=torch_nrms, ok=ok)
    if ok and args.time > 0:
        row["times"] = time_model(model_pt, path, feeds, torch_args, cmd, args)
    return row


def median_ms(fn, k, sync=lambda: None):
    fn()  # warm-up: first-call allocation, kernel selection
    sync()
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(1e3 * (time.perf_counter() - t0))
    return sorted(times)[k // 2]


def time_model(model, path, feeds, torch_args, cmd, args):
    """Median forward times of teenycl, onnxruntime's CPU provider and
    PyTorch eager on the same input (see the docstring)."""
    import onnxruntime as ort
    import torch
    t = {}
    run = subprocess.run(cmd + ["--repeat", str(args.time)], capture_output=True, text=True)  # cmd has --json
    t["teenycl"] = json.loads(run.stdout)["median_ms"] if run.returncode == 0 else None
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    cpu = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    t["onnxruntime_cpu"] = median_ms(lambda: cpu.run(None, feeds), args.time)
    dev = torch.device(args.torch_device)
    model = model.to(dev)
    xt = tuple(a.to(dev) if isinstance(a, torch.Tensor) else a for a in torch_args)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    with torch.no_grad():
        t["torch_default"] = median_ms(lambda: model(*xt), args.time, sync)
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        t["torch_fp32"] = median_ms(lambda: model(*xt), args.time, sync)
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
    fmt = (lambda v: "-" if v is None else f"{v:.3f} ms")
    print(f"  time (median of {args.time}): teenycl {fmt(t['teenycl'])}, onnxruntime CPU "
          f"({args.threads} threads) {fmt(t['onnxruntime_cpu'])}, PyTorch {dev.type} default "
          f"{fmt(t['torch_default'])}, TF32 off {fmt(t['torch_fp32'])}", flush=True)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated, of: " + ", ".join(MODELS))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript",
                    help="torch.onnx.export's TorchScript exporter (default) or its torch.export one")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="export the batch dimension as symbolic (TorchScript exporter only)")
    ap.add_argument("--no-calibrate", action="store_true",
                    help="keep batch norm's default running statistics (see calibrate())")
    ap.add_argument("--device", default=None, help="teenycl device spec (default: the default device)")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4, help="relative to the output's max |value|")
    ap.add_argument("--nrms", type=float, default=1e-4, help="bound on the normalized RMS difference")
    ap.add_argument("--time", type=int, default=0, metavar="K",
                    help="also time each matching model: the median of K runs on each side")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="onnxruntime's intra-op threads")
    ap.add_argument("--torch-device", default=None, help="PyTorch's device for --time (default: cuda if there)")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--teeny-run", default=os.path.join(ROOT, "build", "teeny-run"))
    ap.add_argument("--teeny-info", default=os.path.join(ROOT, "build", "teeny-info"))
    args = ap.parse_args()
    if args.dynamic_batch and args.exporter != "torchscript":
        ap.error("--dynamic-batch is for the TorchScript exporter")
    names = [m for m in args.models.split(",") if m]
    for m in names:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}")
    try:
        import onnx, onnxruntime, torch  # noqa: F401
        if any(m != "yolo11n" for m in names):
            import torchvision  # noqa: F401
        if {"deit_tiny_narrow", "poolformer_s12_narrow", "ghostnetv2_narrow"} & set(names):
            import timm  # noqa: F401
        if "yolo11n" in names:
            import ultralytics  # noqa: F401
    except ImportError as e:
        print(f"check-models: {e} (pip install torch torchvision onnx onnxruntime ultralytics timm)", file=sys.stderr)
        return 2
    if args.time > 0 and args.torch_device is None:
        import torch
        args.torch_device = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(args.workdir, exist_ok=True)
    rows = [check(m, args) for m in names]
    print("\n| model | nodes | imported | max abs diff | nrms | PyTorch-onnxruntime nrms | result |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        num = (lambda v: "-" if v is None else f"{v:.2g}")
        print(f"| {r['model']} | {r['nodes']} | {'yes' if r['imported'] else 'no'} | {num(r['max_abs'])} | "
              f"{num(r['nrms'])} | {num(r.get('torch_nrms'))} | {'ok' if r['ok'] else 'FAIL'} |")
    timed = [r for r in rows if r.get("times")]
    if timed:
        num = (lambda v: "-" if v is None else f"{v:.3f}")
        print(f"\n| model | batch | teenycl ({args.device or 'default device'}) ms | onnxruntime CPU "
              f"({args.threads} threads) ms | PyTorch {args.torch_device} ms | PyTorch, TF32 off ms |")
        print("|---|---|---|---|---|---|")
        for r in timed:
            t = r["times"]
            print(f"| {r['model']} | {args.batch} | {num(t['teenycl'])} | {num(t['onnxruntime_cpu'])} | "
                  f"{num(t['torch_default'])} | {num(t['torch_fp32'])} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
