#!/usr/bin/python3
"""Writes the embedded example's data (deterministic: running it twice gives identical bytes).

  tests/fixtures/embedded/fashion_mnist_256.safetensors
      images       u8 [256, 28, 28]  the first 256 images of Fashion-MNIST's test split
      labels       u8 [256]          their labels
      predictions  u8 [256]          the class PyTorch's MLP (examples/fashion_mnist/weights/mlp.safetensors,
                                     784-512-512-10 with ReLUs, eval) gives each image scaled to [0, 1]
      __metadata__ {"source": ..., "pytorch": <version>, "correct": <predictions equal to labels>}

examples/embedded compiles these in (teeny-embed-weights) and checks its own predictions against
PyTorch's. Fashion-MNIST (Zalando Research, MIT licence) is read from Debian's
dataset-fashion-mnist package.

Usage: /usr/bin/python3 tools/make_embedded_fixtures.py [repository root]   (default: the parent of tools/)
"""
import gzip
import os
import struct
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import write_safetensors  # noqa: E402  (the one safetensors writer)

DATA = "/usr/share/datasets/fashion-mnist"
COUNT = 256


def read_idx(path, count):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    assert magic >> 8 == 0x08, f"{path}: not an IDX file of u8"
    per_item = 1
    for d in shape[1:]:
        per_item *= d
    start = 4 + 4 * dims
    body = data[start:start + count * per_item]
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).reshape((count,) + tuple(shape[1:]))


def load_state(path):
    """A safetensors file's F32 tensors, by key (the only dtype the MLP's weights have)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    import json
    header = json.loads(raw[8:8 + n])
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{key}: {info['dtype']}"
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32)
        out[key] = t.reshape(info["shape"])
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    images = read_idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"), COUNT)
    labels = read_idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz"), COUNT)

    mlp = nn.Sequential()
    mlp.add_module("flatten", nn.Flatten())
    mlp.add_module("fc1", nn.Linear(784, 512))
    mlp.add_module("relu1", nn.ReLU())
    mlp.add_module("fc2", nn.Linear(512, 512))
    mlp.add_module("relu2", nn.ReLU())
    mlp.add_module("fc3", nn.Linear(512, 10))
    state = load_state(os.path.join(root, "examples/fashion_mnist/weights/mlp.safetensors"))
    mlp.load_state_dict({k: v for k, v in state.items() if k.startswith("fc")})
    mlp.eval()
    with torch.no_grad():
        logits = mlp(images.to(torch.float32).reshape(COUNT, 1, 28, 28) / 255.0)
    predictions = logits.argmax(dim=1).to(torch.uint8)
    correct = int((predictions == labels).sum())

    out = os.path.join(root, "tests/fixtures/embedded")
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "fashion_mnist_256.safetensors"),
                      {"images": images, "labels": labels, "predictions": predictions},
                      {"source": "Fashion-MNIST test split, first 256 (Zalando Research, MIT licence)",
                       "pytorch": torch.__version__, "correct": str(correct)})
    print(f"fashion_mnist_256: PyTorch's MLP gets {correct} of {COUNT} right")


if __name__ == "__main__":
    main()
