#!/usr/bin/env python3
"""PyTorch timings of the conv2d cases of tools/bench_conv2d.c (same names).

fp32 with TF32 off (torch.backends.cudnn.allow_tf32 = False,
torch.backends.cuda.matmul.allow_tf32 = False), cudnn.benchmark = True.
Each case: warm-up runs, then the median of CUDA-event timings of single
calls. "fwd" is F.conv2d (no bias); "bwd" is aten.convolution_backward
computing dx and dw (no bias gradient), as teeny_conv2d_backward with a
NULL dbias. GFLOP/s counts 2*B*Cout*OH*OW*(Cin/G)*KH*KW per forward,
twice that per backward.

Usage: python3 bench/torch_conv2d.py [--filter TEXT] [--reps N] [--warmup N]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

CASES = [
    # name, x shape, cout, kernel, stride, pad, groups
    ("conv_resnet_3x3_64to64_56_b32", (32, 64, 56, 56), 64, 3, 1, 1, 1),
    ("conv_resnet_3x3_128to128_28_b32", (32, 128, 28, 28), 128, 3, 1, 1, 1),
    ("conv_resnet_1x1_256to64_56_b32", (32, 256, 56, 56), 64, 1, 1, 0, 1),
    ("conv_resnet_3x3s2_128to256_56_b32", (32, 128, 56, 56), 256, 3, 2, 1, 1),
    ("conv_depthwise_3x3_256_56_b32", (32, 256, 56, 56), 256, 3, 1, 1, 256),
    ("conv_grouped4_3x3_128_28_b32", (32, 128, 28, 28), 128, 3, 1, 1, 4),
    ("conv_stem_7x7s2_3to64_224_b32", (32, 3, 224, 224), 64, 7, 2, 3, 1),
    ("conv_fashion_3x3_1to32_28_b128", (128, 1, 28, 28), 32, 3, 1, 1, 1),
    ("conv_fashion_3x3s2_32to64_28_b128", (128, 32, 28, 28), 64, 3, 2, 1, 1),
]


def time_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", default=None)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name(dev)}"
          f" (median of {args.reps} after {args.warmup} warm-up runs, CUDA events, fp32, TF32 off)")
    for name, xs, cout, k, stride, pad, groups in CASES:
        if args.filter and args.filter not in name:
            continue
        g = torch.Generator(device=dev).manual_seed(0)
        x = torch.rand(xs, device=dev, generator=g) * 2 - 1
        w = torch.rand((cout, xs[1] // groups, k, k), device=dev, generator=g) * 2 - 1
        y = F.conv2d(x, w, None, stride, pad, 1, groups)
        dy = torch.rand(y.shape, device=dev, generator=g) * 2 - 1
        flops = 2.0 * y.numel() * (xs[1] // groups) * k * k

        def fwd():
            F.conv2d(x, w, None, stride, pad, 1, groups)

        def bwd():
            torch.ops.aten.convolution_backward(dy, x, w, None, [stride, stride], [pad, pad], [1, 1], False, [0, 0],
                                                groups, [True, True, False])

        with torch.no_grad():
            for pas, fn, fl in (("fwd", fwd, flops), ("bwd", bwd, 2 * flops)):
                ms = time_ms(fn, args.warmup, args.reps)
                print(f"{'torch':<10} {name:<34} {pas:<8} {ms:10.4f} ms  {fl / ms * 1e-6:10.1f} GFLOP/s", flush=True)


if __name__ == "__main__":
    main()
