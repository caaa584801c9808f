#!/usr/bin/python3
"""Trains the Fashion-MNIST demo's two models with PyTorch and writes their weights.

  examples/fashion_mnist/weights/mlp.safetensors     state_dict of tools/make_fixtures.py's MLP (F32)
  examples/fashion_mnist/weights/lenet.safetensors   state_dict of its LeNet (F32)
  examples/fashion_mnist/weights/pytorch_accuracy.txt
      "<model> <accuracy %, two decimals> <correct>/10000", the test accuracy PyTorch computed (eval
      mode) with exactly the stored f32 weights: teeny running the same weights should match it.

Inputs are pixel / 255 with no other normalisation, shape [B, 1, 28, 28]. Seeded; Adam, batch 128,
one CPU thread (about 4 min of CPU time). Usage: /usr/bin/python3 tools/train_fashion_mnist.py [repository root]
"""
import gzip
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import LeNet, MLP, write_safetensors  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
SEED = 20240607
BATCH = 128
# (model class, epochs, learning rate); the learning rate drops 10x for the last 3 epochs.
MODELS = {"mlp": (MLP, 15, 1e-3), "lenet": (LeNet, 20, 2e-3)}


def read_idx(name, offset):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load(split):
    images = read_idx(f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
    labels = read_idx(f"{split}-labels-idx1-ubyte.gz", 8)
    x = torch.from_numpy(images.astype(np.float32)) / 255.0
    return x, torch.from_numpy(labels.astype(np.int64))


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += int((model(x[i:i + 1000]).argmax(dim=1) == y[i:i + 1000]).sum())
    return correct


def train(name, cls, epochs, lr, train_x, train_y, test_x, test_y):
    torch.manual_seed(SEED)
    model = cls()
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[epochs - 3], gamma=0.1)
    g = torch.Generator().manual_seed(SEED)
    for epoch in range(epochs):
        model.train()
        start = time.time()
        perm = torch.randperm(len(train_x), generator=g)
        total = 0.0
        for i in range(0, len(perm), BATCH):
            idx = perm[i:i + BATCH]
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        sched.step()
        correct = evaluate(model, test_x, test_y)
        print(f"{name} epoch {epoch + 1}/{epochs}: loss {total / len(perm):.4f}, test {correct / 100:.2f}% "
              f"({time.time() - start:.1f}s)", flush=True)
    return model, evaluate(model, test_x, test_y)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = os.path.join(root, "examples", "fashion_mnist", "weights")
    torch.set_num_threads(1)
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    lines = []
    for name, (cls, epochs, lr) in MODELS.items():
        model, correct = train(name, cls, epochs, lr, train_x, train_y, test_x, test_y)
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        write_safetensors(os.path.join(out_dir, f"{name}.safetensors"), state,
                          {"model": name, "test_accuracy": f"{correct / 100:.2f}", "test_correct": str(correct),
                           "input": "pixel / 255, f32[batch, 1, 28, 28]"})
        lines.append(f"{name} {correct / 100:.2f} {correct}/10000\n")
    with open(os.path.join(out_dir, "pytorch_accuracy.txt"), "w") as f:
        f.writelines(lines)
    print("".join(lines), end="")


if __name__ == "__main__":
    main()
