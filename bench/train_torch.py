"""PyTorch's side of the example's training-speed comparison: the network
of examples/fashion_net.py trained with the example's recipe (batch 128,
AdamW, cross-entropy, training-mode batch norm) on fixed random data, so
only the step is timed, as tools/teeny-bench and the example time ours.

    python3 bench/train_torch.py [--device cpu|cuda] [--threads N] [--steps N] [--batch B]

Prints PyTorch's version, the thread count, ms per step, images/s and the
epoch time that rate gives for 60,000 images.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from fashion_net import FashionNet  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    net = FashionNet().to(dev).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.95, 0.999), eps=1e-8, weight_decay=5e-4)
    x = torch.randn(a.batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        loss.item()  # the step is done when its loss is on the host
        times.append(time.perf_counter() - t0)
    times.sort()
    ms = 1e3 * times[len(times) // 2]
    print(f"pytorch {torch.__version__} on {a.device}, {torch.get_num_threads()} threads, batch {a.batch}: "
          f"median {ms:.1f} ms/step, {a.batch * 1e3 / ms:.0f} images/s, "
          f"{60000 / (a.batch * 1e3 / ms):.0f} s per 60,000-image epoch")


if __name__ == "__main__":
    main()
