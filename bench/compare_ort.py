#!/usr/bin/env python3
"""Time imported ONNX models on teenycl against ONNX Runtime's CPU
provider, on the same machine in the same run (issue 41).

    python3 bench/compare_ort.py MODEL.onnx [MODEL.onnx ...]
        [--run build/teeny-run] [--also NAME=PATH/teeny-run ...] [--no-optimize]
        [--device pocl] [--threads 2] [--reps 10] [--rounds 3] [--json FILE]

For each model: its node count, then each engine's forward time: for
teenycl the median of its per-round medians (each of --reps runs), for
ONNX Runtime the median of all its rounds x reps runs. The engines take turns round by round
(teenycl, each --also binary, with --no-optimize teenycl's plan as
written, then ONNX Runtime), so load from elsewhere on the machine falls
on all of them alike. teenycl's time is `teeny-run --repeat REPS --json`'s
(each forward waited for, inputs already on the device); its launches a
forward come from the same JSON. ONNX Runtime's is `sess.run` on the same
kind of input (uniform in [-1, 1), batch 1 where the batch is symbolic),
with --threads intra-op threads, after one warm-up run; every engine gets
one warm-up. Prints a Markdown table: nodes, launches, ms per engine, and
each teenycl row's time over ONNX Runtime's (below 1: teenycl faster).

Needs onnx, onnxruntime and numpy (PyPI); not a dependency of the build or
of `make test`. Outputs are not compared here: tools/check-models.py and
the onnx suites do that.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def teeny_time(binary, model, args, extra):
    cmd = [binary, model, "--device", args.device, "--warmup", "1", "--repeat", str(args.reps), "--json"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    j = json.loads(r.stdout)
    return j


def find(j, *keys):
    """The first of keys found in JSON object j, searched depth first."""
    if isinstance(j, dict):
        for k in keys:
            if k in j:
                return j[k]
        for v in j.values():
            f = find(v, *keys)
            if f is not None:
                return f
    return None


def ort_session(model, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    feeds = {}
    for i in s.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        if "int64" in i.type:
            feeds[i.name] = np.zeros(shape, np.int64)
        elif "int32" in i.type:
            feeds[i.name] = np.zeros(shape, np.int32)
        else:
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    s.run(None, feeds)
    return s, feeds


def ort_times(s, feeds, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        s.run(None, feeds)
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--run", default=os.path.join(ROOT, "build", "teeny-run"), help="teeny-run (default build/)")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=PATH",
                    help="another teeny-run binary to time beside it (an older build), named NAME")
    ap.add_argument("--no-optimize", action="store_true", help="also time teenycl's plan as written (--no-optimize)")
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the rows as JSON to this file")
    args = ap.parse_args()
    try:
        import onnx
    except ImportError as e:
        print(f"compare_ort: {e} (pip install onnx onnxruntime numpy)", file=sys.stderr)
        return 2
    engines = [("teenycl", args.run, [])]
    if args.no_optimize:
        engines.append(("teenycl --no-optimize", args.run, ["--no-optimize"]))
    for a in args.also:
        name, _, path = a.partition("=")
        engines.append((name, path, []))
    rows = []
    for model in args.models:
        nodes = len(onnx.load(model, load_external_data=False).graph.node)
        row = {"model": os.path.basename(model), "nodes": nodes, "ms": {}, "launches": {}}
        times = {e[0]: [] for e in engines}
        times["onnxruntime"] = []
        try:
            s, feeds = ort_session(model, args.threads)
        except Exception as e:  # noqa: BLE001 (a model ORT refuses is reported, not fatal)
            print(f"{model}: onnxruntime: {e}", file=sys.stderr)
            s = None
        for _ in range(args.rounds):
            for name, binary, extra in engines:
                try:
                    j = teeny_time(binary, model, args, extra)
                except RuntimeError as e:
                    print(f"{model}: {name}: {e}", file=sys.stderr)
                    continue
                times[name].append(find(j, "median_ms"))
                row["launches"][name] = find(j, "launches_per_pass")
            if s is not None:
                times["onnxruntime"] += ort_times(s, feeds, args.reps)
        for k, v in times.items():
            row["ms"][k] = statistics.median(v) if v else None
        rows.append(row)
        print(f"{row['model']}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in row["ms"].items() if v), flush=True)
    names = [e[0] for e in engines]
    print()
    print("| model | nodes | " + " | ".join(f"{n} launches" for n in names) + " | " +
          " | ".join(f"{n} ms" for n in names) + " | onnxruntime ms | " +
          " | ".join(f"{n} / ORT" for n in names) + " |")
    print("|---" * (2 + 3 * len(names) + 1) + "|")
    for r in rows:
        ort_ms = r["ms"].get("onnxruntime")
        cells = [r["model"], str(r["nodes"])]
        cells += [str(r["launches"].get(n, "-")) for n in names]
        cells += ["-" if r["ms"].get(n) is None else f"{r['ms'][n]:.2f}" for n in names]
        cells.append("-" if ort_ms is None else f"{ort_ms:.2f}")
        cells += ["-" if not ort_ms or r["ms"].get(n) is None else f"{r['ms'][n] / ort_ms:.2f}" for n in names]
        print("| " + " | ".join(cells) + " |")
    for n in names:
        ratios = [r["ms"][n] / r["ms"]["onnxruntime"] for r in rows
                  if r["ms"].get(n) and r["ms"].get("onnxruntime")]
        if ratios:
            g = float(np.exp(np.mean(np.log(ratios))))
            print(f"\n{n} / onnxruntime, geomean over {len(ratios)} models: {g:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
