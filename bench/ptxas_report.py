"""Registers, local memory and spills of every kernel in teenycl's kernel
cache on an NVIDIA device: NVIDIA's OpenCL driver hands back PTX as a
program's binary, which the cache (TEENY_CACHE_DIR, src/program/cache.c)
stores after its key; this script cuts the PTX out of each entry, runs
CUDA's ptxas on it for sm_90 (what the H200 runs) and prints, per program,
the build options found in the key and one line per kernel.

    python3 bench/ptxas_report.py [--sass] CACHE_DIR [PTXAS]

PTXAS defaults to `ptxas` on the PATH. --sass also disassembles each
program (cuobjdump beside PTXAS) and prints, per kernel, its static
instruction count and most frequent opcodes: how the kernel's
instructions divide between HMMA / FFMA and the rest (on sm_90, for
example, cvt.rna.tf32.f32 is several instructions: FSETP, VIADD, LOP3,
SEL). Information only: ptxas's choices
for sm_90 are what the driver's own compiler makes of the same PTX as far
as ptxas and the driver agree (same CUDA version), not a measurement.
"""
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile


def kernels(ptxas, ptx):
    """(name, registers, smem bytes, 'stack/spill stores/spill loads') per kernel."""
    with tempfile.NamedTemporaryFile(suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        r = subprocess.run([ptxas, "-arch=sm_90", "-v", f.name, "-o", os.devnull], capture_output=True, text=True)
    if r.returncode:
        yield ("(ptxas failed: %s)" % r.stderr.strip()[-200:], "", "", "")
        return
    fn, spill = None, "?"
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            fn, spill = m.group(1), "?"
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            spill = "/".join(m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m and fn:
            sm = re.search(r"(\d+) bytes smem", line)
            yield (fn, m.group(1), sm.group(1) if sm else "0", spill)


def sass_counts(ptxas, ptx):
    """(kernel, instruction count, [(opcode, count)...]) per kernel of ptx, from cuobjdump -sass."""
    cuobjdump = os.path.join(os.path.dirname(ptxas), "cuobjdump") if os.path.dirname(ptxas) else "cuobjdump"
    with tempfile.TemporaryDirectory() as d:
        src, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        open(src, "wb").write(ptx)
        r = subprocess.run([ptxas, "-arch=sm_90", src, "-o", cubin], capture_output=True, text=True)
        if r.returncode:
            return
        sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True).stdout
    fn, ops = None, collections.Counter()
    for line in sass.splitlines() + ["Function : (end)"]:
        m = re.search(r"Function : (\w+|\(end\))", line)
        if m:
            if fn:
                yield (fn, sum(ops.values()), ops.most_common(10))
            fn, ops = m.group(1), collections.Counter()
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", line)
        if m and fn:
            ops[m.group(1)] += 1


def main():
    args = sys.argv[1:]
    sass = "--sass" in args
    args = [a for a in args if a != "--sass"]
    if len(args) not in (1, 2):
        sys.exit(__doc__)
    ptxas = args[1] if len(args) == 2 else "ptxas"
    for path in sorted(glob.glob(os.path.join(args[0], "**", "*"), recursive=True)):
        if not os.path.isfile(path):
            continue
        data = open(path, "rb").read()
        at = data.find(b".version")
        if at < 0:
            continue  # not an NVIDIA entry
        opts = b" ".join(re.findall(rb"-D[A-Za-z0-9_]+(?:=[^\s\x00]*)?", data[:at])).decode("latin1")
        print("== %s %s" % (os.path.basename(path), opts[:600]))
        ptx = data[at:].split(b"\0")[0]
        for name, regs, smem, spill in kernels(ptxas, ptx):
            print("  %-28s regs %3s smem %6s stack/spill %s" % (name, regs, smem, spill))
        for name, total, top in sass_counts(ptxas, ptx) if sass else ():
            print("  %-28s sass %5d: %s" % (name, total, " ".join("%s %d" % t for t in top)))


if __name__ == "__main__":
    main()
