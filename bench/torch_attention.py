#!/usr/bin/env python3
"""torch_attention.py -- PyTorch's scaled_dot_product_attention on the cases
of tools/bench_attention.c, same case names, for the comparison in
bench/RESULTS.md.

fp32, TF32 disabled, CUDA-event timing: warm-up runs, then the median of
per-run times. FLOPs as in bench_attention.c: 2*BH*Nq*Nk*(D + Dv) forward,
the backward counted as 2.5 times the forward. The PSA case runs the same
math as teeny_psa_attention_*: q, k [B*heads, N, kd] and v [B*heads, N, 2kd]
taken from the NCHW qkv tensor, the output put back to NCHW; the permutes
are part of the timed work, as in a PyTorch C2PSA module.

Usage: python3 bench/torch_attention.py [--filter TEXT] [--reps N] [--warmup N]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F


def timed(fn, warmup, reps):
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


def report(name, pass_, ms, flops):
    print(f"{'torch':<10} {name:<34} {pass_:<8} {ms:10.4f} ms  {flops / ms * 1e-9:8.2f} TFLOP/s", flush=True)


def attention_case(name, bh, n, d, args):
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v, g = (torch.rand(bh, n, d, device="cuda", generator=gen) * 2 - 1 for _ in range(4))
    flops = 4.0 * bh * n * n * d

    def fwd():
        F.scaled_dot_product_attention(q, k, v)

    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))

    def fwd_bwd():
        o = F.scaled_dot_product_attention(qg, kg, vg)
        o.backward(g)

    with torch.no_grad():
        report(name, "fwd", timed(fwd, args.warmup, args.reps), flops)
    report(name, "fwd+bwd", timed(fwd_bwd, args.warmup, args.reps), 3.5 * flops)


def psa_case(name, b, heads, kd, h, w, args):
    n = h * w
    gen = torch.Generator(device="cuda").manual_seed(2)
    qkv = torch.rand(b, heads * 4 * kd, h, w, device="cuda", generator=gen) * 2 - 1
    g = torch.rand(b, heads * 2 * kd, h, w, device="cuda", generator=gen) * 2 - 1
    flops = 2.0 * b * heads * n * n * (kd + 2 * kd)

    def psa(x):
        parts = x.view(b, heads, 4 * kd, n).split([kd, kd, 2 * kd], dim=2)
        q, k, v = (p.transpose(-1, -2).reshape(b * heads, n, p.shape[2]) for p in parts)
        o = F.scaled_dot_product_attention(q, k, v)  # [B*heads, N, 2kd]
        return o.view(b, heads, n, 2 * kd).permute(0, 1, 3, 2).reshape(b, heads * 2 * kd, h, w)

    xg = qkv.clone().requires_grad_(True)

    def fwd():
        psa(qkv)

    def fwd_bwd():
        psa(xg).backward(g)

    with torch.no_grad():
        report(name, "fwd", timed(fwd, args.warmup, args.reps), flops)
    report(name, "fwd+bwd", timed(fwd_bwd, args.warmup, args.reps), 3.5 * flops)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", default="")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()} (fp32, TF32 off, median of {args.reps} "
          f"after {args.warmup} warm-up runs, CUDA events)", flush=True)
    cases = [
        ("attn_bh128_n400_d32", 128, 400, 32),
        ("attn_bh64_n1600_d32", 64, 1600, 32),
        ("attn_bh32_n4096_d64", 32, 4096, 64),
        ("attn_bh64_n1024_d64", 64, 1024, 64),
    ]
    for name, bh, n, d in cases:
        if args.filter in name:
            attention_case(name, bh, n, d, args)
    if args.filter in "psa_b32_h4_kd32_20x20":
        psa_case("psa_b32_h4_kd32_20x20", 32, 4, 32, 20, 20, args)


if __name__ == "__main__":
    main()
