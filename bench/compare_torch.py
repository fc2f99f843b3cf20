#!/usr/bin/env python3
"""One comparison of record: every teeny-bench case against PyTorch, same run.

Runs `teeny-bench --json` on the device and times the same cases in
PyTorch as its users call them, in the same invocation, and prints one
markdown table of ratios, PyTorch time / teenycl time (above 1: teenycl is
faster), with a geometric mean per family and pass. The cases and their
shapes come from teeny-bench's JSON lines, so the two sides cannot drift.

PyTorch, as its users call it:
  conv2d       F.conv2d (no bias) forward; backward = autograd's dx and dw
               (torch.autograd.grad). On a GPU twice: cuDNN with TF32 off
               (strict fp32, what teenycl computes) and on (PyTorch's
               default for convolutions); cudnn.benchmark on.
  batchnorm2d  F.batch_norm in training mode (batch statistics, running
               statistics updated); backward = autograd's dx, dweight,
               dbias; fwd+bwd both.
  attention    F.scaled_dot_product_attention on 4-D [B, H, N, D] tensors
               that require grad, in whichever backend PyTorch picks
               (printed; found by profiling one call); fwd+bwd adds
               autograd's dq, dk, dv. PyTorch before 2.0 has no SDPA: the
               math is written out (softmax(q kT * scale) v) and the table
               says so.
  psa_attention the YOLO C2PSA layout: qkv [B, heads*4*kd, H, W] viewed
               as [B, heads, 4*kd, N], split into q, k, v, transposed to
               [B, heads, N, c] for SDPA, the output put back as NCHW.
  train_step   one training step of examples/fashion_net.py's network
               (the twin of examples/fashion_net.h) at the case's batch
               on fixed random data: zero_grad, forward, cross-entropy,
               backward, AdamW with the example's settings, twice: eager,
               and the model under torch.compile(mode="reduce-overhead")
               (CUDA graphs; compiled once per TF32 setting during the
               warm-up). teeny-bench's side is forward, backward and one
               AdamW step on fixed data, its launches per step in the case's
               shape. Each timed step starts on an idle device (both
               sides). The loop case (train_fashion_b128_loop, "steps" in
               its shape) runs that many steps back to back, as a training
               loop does, and reports the time per step on both sides.
               teeny-bench times both by the host's clock over a drained
               queue (no profiling events: an event per launch costs the
               host ~7 us a launch on the H200); PyTorch by CUDA events
               around the steps.
Everything else is strict fp32 (matmul TF32 off).

--tf32 compares the two tf32 modes instead: teeny-bench --tf32
(teeny_ctx_set_tf32) against PyTorch with TF32 on for convolutions and
matmuls (torch.backends.cudnn.allow_tf32 and
torch.backends.cuda.matmul.allow_tf32), attention included.

Timing: warm-up runs, then the median of repeated single calls: CUDA
events on a GPU; time.perf_counter on the CPU. teeny-bench's own timing is
device time from OpenCL profiling events.

--loop adds a second timing of every case on both sides: the same number
of calls back to back, one CUDA event pair (or perf_counter) around them
all on PyTorch's side, teeny-bench --loop (the host's clock over a drained
queue, no profiling events) on teenycl's, each divided by the calls; three
more columns (loop times and their ratio) and a geomean of the loop
ratios. It is what a loop of calls costs on each side, launch costs
included: a multi-launch teenycl case whose kernels are shorter than the
host's cost of a profiled launch shows gaps in its event span that a loop
does not have. The training step's cases are loops already (no columns).

Paired (the default with --cpu, --paired/--unpaired to choose): teeny-bench
--list gives the cases, then each case runs in its own teeny-bench --json
(which measures the ceilings again) immediately followed by its PyTorch
side, so that both sides of a ratio see the same load on a shared machine.
Unpaired (the default on a GPU): one teeny-bench run for every case, then
PyTorch for every case.

--cpu runs PyTorch on the CPU with torch.set_num_threads(N), N = the
OpenCL device's compute units from teeny-bench's JSON header, and
teeny-bench on `--device pocl` (unless --device says otherwise).

Usage: python3 bench/compare_torch.py [--cpu] [--tf32] [--loop] [--bench build/teeny-bench]
           [--device SPEC] [--filter TEXT[,TEXT...]] [--reps N] [--warmup N]
           [--threads N] [--save-json FILE] [--paired | --unpaired]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def run_teeny(args, name_filter, extra=(), fatal=True):
    """teeny-bench's header, its case objects and its raw output; the
    header is None (fatal=False) or the script exits when it printed none."""
    cmd = [args.bench, "--json", "--reps", str(args.reps), "--warmup", str(args.warmup)] + list(extra)
    if args.tf32:
        cmd.append("--tf32")
    if args.loop:
        cmd.append("--loop")
    if args.device:
        cmd += ["--device", args.device]
    if name_filter:
        cmd += ["--filter", name_filter]
    print("running: " + " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    header, cases = None, []
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if obj.get("type") == "header":
            header = obj
        elif obj.get("type") == "case":
            cases.append(obj)
    if header is None:
        msg = f"compare_torch: {' '.join(cmd)} printed no JSON header (exit status {proc.returncode})"
        if fatal:
            sys.exit(msg)
        print(msg, file=sys.stderr)
    if proc.returncode != 0:
        print(f"compare_torch: teeny-bench exited with {proc.returncode}; failed cases are marked", file=sys.stderr)
    return header, cases, proc.stdout


class Timer:
    def __init__(self, dev, warmup, reps):
        self.dev, self.warmup, self.reps = dev, warmup, reps

    def __call__(self, fn):
        for _ in range(self.warmup):
            fn()
        times = []
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
            for _ in range(self.reps):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            for _ in range(self.reps):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    def loop(self, fn):
        """fn called reps times back to back (after __call__'s runs warmed it): the time per call."""
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(self.reps):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / self.reps
        t0 = time.perf_counter()
        for _ in range(self.reps):
            fn()
        return (time.perf_counter() - t0) * 1e3 / self.reps


def rand(shape, dev, gen, grad=False):
    t = torch.rand(shape, device=dev, generator=gen) * 2 - 1
    return t.requires_grad_(grad)


def sdpa(q, k, v, causal=False):
    if HAS_SDPA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        n, m = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def sdpa_backend(q, k, v):
    """Which kernel PyTorch dispatched scaled_dot_product_attention to."""
    if not HAS_SDPA:
        return f"math written out (torch {torch.__version__} has no F.scaled_dot_product_attention)"
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v)
    names = sorted({e.name for e in prof.events() if "_scaled_dot_product" in e.name or "_flash_attention" in e.name
                    or "_efficient_attention" in e.name})
    inner = [n for n in names if n != "aten::scaled_dot_product_attention"]
    return ", ".join(n.replace("aten::", "") for n in inner) or "unknown"


def build_case(case, dev, gen):
    """PyTorch callables for one case: {direction: fn}, and a note."""
    s = case["shape"]
    op = s["op"]
    note = ""
    if op == "conv2d":
        x, w = rand(s["x"], dev, gen, True), rand(s["w"], dev, gen, True)
        stride, pad, groups = s["stride"], s["pad"], s["groups"]
        y = F.conv2d(x, w, None, stride, pad, 1, groups)
        dy = rand(y.shape, dev, gen)

        def fwd():
            with torch.no_grad():
                F.conv2d(x, w, None, stride, pad, 1, groups)

        def bwd():
            torch.autograd.grad(y, (x, w), dy, retain_graph=True)

        return {"fwd": fwd, "bwd": bwd}, note
    if op == "batchnorm2d":
        c = s["x"][1]
        x = rand(s["x"], dev, gen, True)
        weight, bias = rand((c,), dev, gen, True), rand((c,), dev, gen, True)
        rm, rv = torch.zeros(c, device=dev), torch.ones(c, device=dev)
        mom, eps = s["momentum"], s["eps"]

        def bn():
            return F.batch_norm(x, rm, rv, weight, bias, True, mom, eps)

        y = bn()
        dy = rand(y.shape, dev, gen)

        def fwd():
            bn()

        def bwd():
            torch.autograd.grad(y, (x, weight, bias), dy, retain_graph=True)

        def fwd_bwd():
            torch.autograd.grad(bn(), (x, weight, bias), dy)

        return {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd_bwd}, note
    if op == "attention":
        qs = (s["b"], s["heads"], s["n"], s["d"])
        vs = (s["b"], s["heads"], s["n"], s["dv"])
        q, k, v = rand(qs, dev, gen, True), rand(qs, dev, gen, True), rand(vs, dev, gen, True)
        do = rand(vs, dev, gen)
        causal = bool(s.get("causal"))
        note = "SDPA backend: " + sdpa_backend(q, k, v) + (", is_causal=True" if causal else "")

        def fwd():
            sdpa(q, k, v, causal)

        def fwd_bwd():
            torch.autograd.grad(sdpa(q, k, v, causal), (q, k, v), do)

        return {"fwd": fwd, "fwd+bwd": fwd_bwd}, note
    if op == "psa_attention":
        b, heads, kd, h, w = s["b"], s["heads"], s["key_dim"], s["h"], s["w"]
        n = h * w
        qkv = rand((b, heads * 4 * kd, h, w), dev, gen, True)
        do = rand((b, heads * 2 * kd, h, w), dev, gen)

        def psa():
            q, k, v = qkv.view(b, heads, 4 * kd, n).split([kd, kd, 2 * kd], dim=2)
            o = sdpa(q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1))
            return o.transpose(-2, -1).reshape(b, heads * 2 * kd, h, w)

        q, k, v = qkv.detach().view(b, heads, 4 * kd, n).split([kd, kd, 2 * kd], dim=2)
        note = "SDPA backend: " + sdpa_backend(q.transpose(-2, -1).requires_grad_(),
                                               k.transpose(-2, -1).requires_grad_(),
                                               v.transpose(-2, -1).requires_grad_())

        def fwd():
            psa()

        def fwd_bwd():
            torch.autograd.grad(psa(), (qkv,), do)

        return {"fwd": fwd, "fwd+bwd": fwd_bwd}, note
    if op == "train_step":
        floor = (f", eager launches {s['launch_us']:.2f} us apart: {s['launches'] * s['launch_us'] * 1e-3:.3f} ms "
                 f"of a step" if "launch_us" in s and "launches" in s else "")
        floor += f", the host enqueuing for {s['host_ms']:.3f} ms of it" if "host_ms" in s else ""
        return train_step_fns(s, dev, gen), (f"{s.get('launches', '?')} launches per teenycl step{floor}; "
                                             "teenycl timed by the host's clock over a drained queue")
    raise ValueError(f"unknown op {op!r} in case {case['name']}")


def train_step_fns(s, dev, gen):
    """The PyTorch step of examples/fashion_net.py, eager and compiled:
    {"step (eager)": fn, "step (reduce-overhead)": fn}; with "steps" in the
    shape (the loop case), each fn runs that many steps back to back and
    the keys say "loop" (the caller divides the time by the steps)."""
    steps = s.get("steps", 1)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from fashion_net import FashionNet
    torch.manual_seed(1)
    net = FashionNet().to(dev).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.95, 0.999), eps=1e-8, weight_decay=5e-4)
    x = rand((s["batch"], 1, 28, 28), dev, gen)
    y = torch.randint(0, 10, (s["batch"],), device=dev, generator=gen)
    compiled = torch.compile(net, mode="reduce-overhead")

    def step_with(model):
        def step():
            for _ in range(steps):
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(x), y).backward()
                opt.step()
        return step

    way = "loop" if "steps" in s else "step"
    return {f"{way} (eager)": step_with(net), f"{way} (reduce-overhead)": step_with(compiled)}


def table_family(case):
    s = case["shape"]
    if s["op"] == "conv2d":
        return "depthwise conv" if s["groups"] > 1 and s["w"][1] == 1 else "conv"
    if s["op"] == "attention" and s.get("causal"):
        return "causal attention"
    return {"batchnorm2d": "batch norm", "attention": "attention", "psa_attention": "PSA attention",
            "train_step": "training step"}[s["op"]]


def set_tf32(on, matmul=False):
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = matmul


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, spec):
    return format(x, spec) if x is not None else "—"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="build/teeny-bench", help="teeny-bench binary (default build/teeny-bench)")
    ap.add_argument("--device", default=None, help="teeny-bench --device (default: pocl with --cpu, else its default)")
    ap.add_argument("--cpu", action="store_true", help="PyTorch on the CPU against teeny-bench --device pocl")
    ap.add_argument("--tf32", action="store_true",
                    help="teeny-bench --tf32 against PyTorch with TF32 on (cuDNN and matmul), GPU only")
    ap.add_argument("--loop", action="store_true",
                    help="also time every case as repeated calls back to back, both sides (three more columns)")
    ap.add_argument("--filter", default=None, help="teeny-bench --filter: comma-separated name substrings")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="--cpu: PyTorch threads (default: the device's compute units)")
    ap.add_argument("--save-json", default=None, help="also write teeny-bench's JSON lines to this file")
    ap.add_argument("--paired", dest="paired", action="store_true", default=None,
                    help="one teeny-bench run per case, each followed by its PyTorch side (default with --cpu)")
    ap.add_argument("--unpaired", dest="paired", action="store_false",
                    help="one teeny-bench run for all cases, then PyTorch (default on a GPU)")
    args = ap.parse_args()
    if args.cpu and not args.device:
        args.device = "pocl"
    if args.cpu and args.tf32:
        sys.exit("compare_torch: --tf32 compares GPU tensor-core modes; it does not go with --cpu")

    if not args.cpu and not torch.cuda.is_available():
        sys.exit("compare_torch: no CUDA device for PyTorch (use --cpu for the CPU comparison)")
    paired = args.cpu if args.paired is None else args.paired
    if paired:  # the case list first, then teenycl and PyTorch case by case
        header, listed, raw = run_teeny(args, args.filter, ["--list"])
        names = list(dict.fromkeys(c["name"] for c in listed))
    else:
        header, cases, raw = run_teeny(args, args.filter)
        names = list(dict.fromkeys(c["name"] for c in cases))
    raws, headers = [raw], [header]

    if args.cpu:
        dev = torch.device("cpu")
        threads = args.threads or int(header["compute_units"])
        torch.set_num_threads(threads)
        torch_desc = (f"PyTorch {torch.__version__} on the CPU, {torch.get_num_threads()} threads "
                      f"(torch.set_num_threads: the OpenCL device's compute units), oneDNN "
                      f"{'on' if torch.backends.mkldnn.is_available() else 'off'}, time.perf_counter")
    else:
        dev = torch.device("cuda")
        torch.backends.cudnn.benchmark = True
        torch_desc = (f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
                      f"{torch.cuda.get_device_name(dev)}, CUDA events, cudnn.benchmark on" +
                      (", TF32 on (cuDNN and matmul)" if args.tf32 else ""))
    set_tf32(False)
    timer = Timer(dev, args.warmup, args.reps)
    gen = torch.Generator(device=dev).manual_seed(0)

    rows, notes = [], {}
    for name in names:
        if paired:
            h, cases, raw = run_teeny(args, name, fatal=False)
            raws.append(raw)
            if h is None:  # it crashed or could not start: the case's rows say so
                cases = [dict(c, error="teeny-bench failed") for c in listed if c["name"] == name]
            else:
                headers.append(h)
        group = [c for c in cases if c["name"] == name]
        if not group:
            continue
        try:
            fns, note = build_case(group[0], dev, gen)
        except RuntimeError as e:  # out of memory, an unsupported shape: the table says so
            fns, note = {}, "PyTorch failed: " + str(e).splitlines()[0]
        if note:
            notes[name] = note
        if group[0]["shape"]["op"] == "train_step":  # one teenycl row against each PyTorch way of running it
            group = [dict(group[0], direction=d) for d in fns] if fns else group
        for case in group:
            row = {"case": case, "family": table_family(case), "teeny_ms": case.get("median_ms"),
                   "torch_ms": None, "torch_tf32_ms": None, "teeny_loop_ms": case.get("loop_ms"),
                   "torch_loop_ms": None}
            fn = fns.get(case["direction"])
            per = case["shape"].get("steps", 1) if case["shape"]["op"] == "train_step" else 1
            try:
                if fn is not None:
                    set_tf32(args.tf32, args.tf32)
                    row["torch_ms"] = timer(fn) / per
                    if args.loop and row["teeny_loop_ms"] is not None:
                        row["torch_loop_ms"] = timer.loop(fn) / per
                    if not args.cpu and not args.tf32 and case["shape"]["op"] in ("conv2d", "train_step"):
                        set_tf32(True)
                        row["torch_tf32_ms"] = timer(fn) / per
            except RuntimeError as e:
                notes[name] = "PyTorch failed: " + str(e).splitlines()[0]
            set_tf32(False)
            print(f"{name:<36} {case['direction']:<8} teenycl {fmt(row['teeny_ms'], '.4f')} ms  "
                  f"torch {fmt(row['torch_ms'], '.4f')} ms" +
                  (f"  loop: teenycl {fmt(row['teeny_loop_ms'], '.4f')} torch {fmt(row['torch_loop_ms'], '.4f')}"
                   if args.loop else "") +
                  (f"  torch tf32 {row['torch_tf32_ms']:.4f} ms" if row["torch_tf32_ms"] is not None else ""),
                  file=sys.stderr, flush=True)
            rows.append(row)
        del fns  # free the case's tensors before the next one
        if dev.type == "cuda":
            torch.cuda.empty_cache()

    if args.save_json:
        with open(args.save_json, "w") as f:
            f.write("".join(raws))
    gpu = not args.cpu and not args.tf32  # the extra TF32-on columns
    print("command: " + " ".join(["python3"] + sys.argv))
    print()
    timed = [h for h in headers if h.get("fma_gflops")]
    copy = sorted(h["copy_gbps"] for h in timed)
    fma = sorted(h["fma_gflops"] for h in timed)
    span = (lambda xs: f"{xs[0]:.1f}" if len(xs) == 1 else f"{xs[0]:.1f}-{xs[-1]:.1f}") if timed else None
    print(f"teenycl {header['version']} on {header['device']} ({header['platform']}, driver {header['driver_version']}, "
          f"{header['compute_units']} compute units{', tf32 tensor cores' if header.get('tf32') else ''}): "
          f"OpenCL profiling events, median of {args.reps} after "
          f"{args.warmup} warm-up runs; " +
          (f"measured copy bandwidth {span(copy)} GB/s, FMA rate {span(fma)} GFLOP/s "
           f"({len(timed)} teeny-bench run{'s' if len(timed) > 1 else ''}"
           f"{', one per case, each followed by its PyTorch side' if paired else ''}); " if timed else "") +
          f"{header['time_utc']}")
    print(f"{torch_desc}; median of {args.reps} after {args.warmup} warm-up runs")
    print()
    print("Ratio = PyTorch time / teenycl time (above 1: teenycl is faster). "
          "% copy / % fma: teenycl's compulsory bytes and flops per second as a share of the measured ceilings.")
    print()
    head = "| family | case | pass | teenycl ms | % copy | % fma | PyTorch ms | ratio |"
    sep = "|---|---|---|---:|---:|---:|---:|---:|"
    if gpu:
        head += " PyTorch ms, TF32 on | ratio, TF32 on |"
        sep += "---:|---:|"
    if args.loop:
        head += " teenycl loop ms | PyTorch loop ms | loop ratio |"
        sep += "---:|---:|---:|"
    print(head)
    print(sep)
    for r in rows:
        c = r["case"]
        t = r["teeny_ms"]
        ratio = r["torch_ms"] / t if (t and r["torch_ms"]) else None
        r["ratio"] = ratio
        line = (f"| {r['family']} | {c['name']} | {c['direction']} | {fmt(t, '.4f') if 'error' not in c else 'failed'} | "
                f"{fmt(c.get('pct_copy_bw') if c.get('bytes') else None, '.1f')} | "
                f"{fmt(c.get('pct_fma') if c.get('flops') else None, '.1f')} | "
                f"{fmt(r['torch_ms'], '.4f')} | {fmt(ratio, '.2f')} |")
        if gpu:
            rt = r["torch_tf32_ms"] / t if (t and r["torch_tf32_ms"]) else None
            r["ratio_tf32"] = rt
            line += f" {fmt(r['torch_tf32_ms'], '.4f')} | {fmt(rt, '.2f')} |"
        if args.loop:
            tl, pl = r["teeny_loop_ms"], r["torch_loop_ms"]
            r["ratio_loop"] = pl / tl if (tl and pl) else None
            line += f" {fmt(tl, '.4f')} | {fmt(pl, '.4f')} | {fmt(r['ratio_loop'], '.2f')} |"
        print(line)
    print()
    print("| family | pass | cases | geomean ratio |" + (" geomean ratio, TF32 on |" if gpu else "") +
          (" geomean loop ratio |" if args.loop else ""))
    print("|---|---|---:|---:|" + ("---:|" if gpu else "") + ("---:|" if args.loop else ""))
    groups = {}
    for r in rows:
        groups.setdefault((r["family"], r["case"]["direction"]), []).append(r)
    for r in rows:
        groups.setdefault((r["family"], "all"), []).append(r)
    for (fam, pas), rs in groups.items():
        g = geomean([r["ratio"] for r in rs])
        line = f"| {fam} | {pas} | {len([r for r in rs if r['ratio']])} | {fmt(g, '.2f')} |"
        if gpu:
            line += f" {fmt(geomean([r.get('ratio_tf32') for r in rs]), '.2f')} |"
        if args.loop:
            line += f" {fmt(geomean([r.get('ratio_loop') for r in rs]), '.2f')} |"
        print(line)
    if notes:
        print()
        for name, note in notes.items():
            print(f"- {name}: {note}")


if __name__ == "__main__":
    main()
