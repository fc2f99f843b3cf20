#!/usr/bin/env python3
"""Imported models on a GPU against PyTorch on the same GPU, in the same
run (issue 41's GPU row): teenycl's `teeny-run` of the ONNX export against
the same torchvision module in PyTorch eager and under
torch.compile(mode="reduce-overhead").

    python3 bench/torch_models.py [--models resnet18,mobilenet_v3_small]
        [--batches 1,8] [--size 224] [--reps 50] [--run build/teeny-run]
        [--device nvidia] [--workdir /tmp/torch_models]

For each model and batch: torchvision's module with random weights from a
fixed seed, in eval mode, exported to ONNX (TorchScript exporter, opset
17, that batch), then timed three ways, each forward waited for and timed
by the host's clock, the median of --reps after warm-up runs:
  - teenycl: `teeny-run MODEL --device D --warmup 10 --repeat REPS --json`
    (input already on the device);
  - PyTorch eager: torch.no_grad(), fp32 with TF32 off for matmul and
    cuDNN (teenycl computes strict fp32), cudnn.benchmark on, input already
    on the GPU, torch.cuda.synchronize() after each call;
  - the same module under torch.compile(mode="reduce-overhead") (CUDA
    graphs), after 5 warm-up calls.
Prints a Markdown table with each PyTorch time over teenycl's (above 1:
teenycl faster). Needs torch, torchvision and onnx; the GPU PyTorch sees
must be the one teenycl's --device names. Not a dependency of the build.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_ms(fn, x, reps, warm):
    import torch
    with torch.no_grad():
        for _ in range(warm):
            fn(x)
        torch.cuda.synchronize()
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(x)
            torch.cuda.synchronize()
            out.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v3_small")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--run", default=os.path.join(ROOT, "build", "teeny-run"))
    ap.add_argument("--device", default="nvidia")
    ap.add_argument("--workdir", default="/tmp/torch_models")
    args = ap.parse_args()
    import torch
    import torchvision
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    os.makedirs(args.workdir, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        for batch in [int(b) for b in args.batches.split(",")]:
            torch.manual_seed(0)
            model = getattr(torchvision.models, name)(weights=None).eval()
            x = torch.randn(batch, 3, args.size, args.size)
            path = os.path.join(args.workdir, f"{name}_b{batch}.onnx")
            with torch.no_grad():
                kw = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
                torch.onnx.export(model, (x,), path, opset_version=17, input_names=["input"],
                                  do_constant_folding=True, **kw)
            r = subprocess.run([args.run, path, "--device", args.device, "--warmup", "10", "--repeat",
                                str(args.reps), "--json"], capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                print(f"{name} b{batch}: teeny-run failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
                continue
            j = json.loads(r.stdout)
            teeny = j["median_ms"]
            m = model.cuda()
            xc = x.cuda()
            eager = torch_ms(m, xc, args.reps, 10)
            compiled = torch_ms(torch.compile(m, mode="reduce-overhead"), xc, args.reps, 5)
            row = (name, batch, j.get("launches_per_pass"), teeny, eager, compiled)
            rows.append(row)
            print(f"{name} b{batch}: teenycl {teeny:.3f} ms ({row[2]} launches), eager {eager:.3f}, "
                  f"compiled {compiled:.3f}", flush=True)
    print("\n| model | batch | teenycl launches | teenycl ms | PyTorch eager ms | torch.compile ms | eager / teenycl | "
          "compile / teenycl |")
    print("|---|---|---|---|---|---|---|---|")
    for n, b, l, t, e, c in rows:
        print(f"| {n} | {b} | {l} | {t:.3f} | {e:.3f} | {c:.3f} | {e / t:.2f} | {c / t:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
