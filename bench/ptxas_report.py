"""Registers, local memory and spills of every kernel in teenycl's kernel
cache on an NVIDIA device: NVIDIA's OpenCL driver hands back PTX as a
program's binary, which the cache (TEENY_CACHE_DIR, src/program/cache.c)
stores after its key; this script cuts the PTX out of each entry, runs
CUDA's ptxas on it for sm_90 (what the H200 runs) and prints, per program,
the build options found in the key and one line per kernel.

    python3 bench/ptxas_report.py CACHE_DIR [PTXAS]

PTXAS defaults to `ptxas` on the PATH. Information only: ptxas's choices
for sm_90 are what the driver's own compiler makes of the same PTX as far
as ptxas and the driver agree (same CUDA version), not a measurement.
"""
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


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    ptxas = sys.argv[2] if len(sys.argv) == 3 else "ptxas"
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "**", "*"), recursive=True)):
        if not os.path.isfile(path):
            continue
        data = open(path, "rb").read()
        at = data.find(b".version")
        if at < 0:
            continue  # not an NVIDIA entry
        opts = b" ".join(re.findall(rb"-D[A-Za-z0-9_]+(?:=[^\s\x00]*)?", data[:at])).decode("latin1")
        print("== %s %s" % (os.path.basename(path), opts[:600]))
        for name, regs, smem, spill in kernels(ptxas, data[at:].split(b"\0")[0]):
            print("  %-28s regs %3s smem %6s stack/spill %s" % (name, regs, smem, spill))


if __name__ == "__main__":
    main()
