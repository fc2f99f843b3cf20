"""The PyTorch twin of examples/fashion_net.h: the same network with the
same parameter names, so a teenycl checkpoint loads with
load_state_dict(strict=True) and evaluates to the same test accuracy.

    python3 examples/fashion_net.py CHECKPOINT [--data DIR] [--device cuda|cpu]

Reads safetensors and IDX files with the standard library and NumPy only.
"""
import argparse
import gzip
import json
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


class Conv(nn.Module):
    """conv2d (padding k/2, no bias) + batchnorm2d + SiLU (or no activation)."""

    def __init__(self, ci, co, k, s=1, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(ci, co, k, s, k // 2, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(co, eps=1e-5, momentum=0.1)
        self.act = nn.SiLU() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Attention(nn.Module):
    """YOLO C2PSA attention: per head Q (key_dim), K (key_dim), V (head_dim) channels."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.key_dim = self.head_dim // 2
        self.scale = self.key_dim ** -0.5
        self.qkv = Conv(dim, dim + 2 * self.key_dim * num_heads, 1, act=False)
        self.pe = Conv(dim, dim, 3, g=dim, act=False)
        self.proj = Conv(dim, dim, 1, act=False)

    def forward(self, x):
        b, c, h, w = x.shape
        n = h * w
        q, k, v = self.qkv(x).view(b, self.num_heads, 2 * self.key_dim + self.head_dim, n).split(
            [self.key_dim, self.key_dim, self.head_dim], dim=2)
        attn = ((q.transpose(-2, -1) @ k) * self.scale).softmax(dim=-1)
        x = (v @ attn.transpose(-2, -1)).view(b, c, h, w) + self.pe(v.reshape(b, c, h, w))
        return self.proj(x)


class PSABlock(nn.Module):
    def __init__(self, c, num_heads):
        super().__init__()
        self.attn = Attention(c, num_heads)
        self.ffn = nn.Sequential(Conv(c, 2 * c, 1), Conv(2 * c, c, 1, act=False))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.ffn(x)


class FashionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = Conv(1, 32, 3)
        self.conv2 = Conv(32, 64, 3, 2)
        self.conv3 = Conv(64, 128, 3, 2)
        self.psa = PSABlock(128, 4)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        x = self.psa(self.conv3(self.conv2(self.conv1(x))))
        return self.fc(x.mean(dim=(2, 3)))


def load_safetensors(path):
    """name -> tensor, and the metadata dict."""
    dtypes = {"F32": np.float32, "I64": np.int64}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        arr = np.frombuffer(body[a:b], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data[4 + 4 * ndim:], dtype=np.uint8).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    tensors, meta = load_safetensors(args.checkpoint)
    state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    net = FashionNet()
    net.load_state_dict(state, strict=True)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    net = net.to(args.device).eval()
    images = load_idx(f"{args.data}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    labels = torch.from_numpy(load_idx(f"{args.data}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    x = (torch.from_numpy(images)[:, None] - MEAN) / STD
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 500):
            logits = net(x[i:i + 500].to(args.device))
            correct += (logits.argmax(1).cpu() == labels[i:i + 500]).sum().item()
    params = sum(p.numel() for p in net.parameters())
    print(f"pytorch {torch.__version__}: loaded {args.checkpoint} with strict=True ({params} parameters, "
          f"epoch {meta.get('epoch', '?')}); test_acc {correct / len(x):.4f}")


if __name__ == "__main__":
    main()
