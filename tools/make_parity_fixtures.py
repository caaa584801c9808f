#!/usr/bin/python3
"""Writes teeny's training parity fixtures (deterministic: running it twice gives identical bytes).

PyTorch (1.13 on Debian 12: run with /usr/bin/python3) is the reference: each run is 20 optimizer
steps of batch 32 on the Fashion-MNIST training images (pixel / 255, f32 [32, 1, 28, 28], int64
labels, loss = F.cross_entropy, mean), starting from a seeded default PyTorch init.

  tests/fixtures/train/<run>.safetensors, run in mlp_sgd, mlp_adamw, lenet_bn_adamw:
      init.<key>     every initial state_dict entry (parameters and buffers). Stored in the file the
                     metadata's "init_file" names: mlp_adamw starts from exactly mlp_sgd's initial
                     weights and holds no init.* itself (keeps the fixtures under 10 MB).
      batches        int64 [20, 32]: indices into the 60,000 training images, step-major
      loss           float64 [20]: the loss of each step, computed before that step's update
      lr             float64 [20]: the learning rate used by each step's update
      final.<key>    the state_dict after the 20 steps (buffers included)
      eval.indices   int64 [64]: indices into the 10,000 test images
      eval.logits    float32 [64, 10]: model.eval() logits on those test images after training
      __metadata__   run, model, optimizer, schedule, batch size, steps, torch version, ...
  tests/fixtures/train/README.md describes the layout.

Usage: /usr/bin/python3 tools/make_parity_fixtures.py [repository root]   (default: the parent of tools/)
"""
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS: one thread, fixed results
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import MLP, seed_of, write_safetensors  # noqa: E402
from train_fashion_mnist import load  # noqa: E402

STEPS = 20
BATCH = 32
EVAL = 64


class LeNetBN(nn.Module):
    """conv1 Conv2d(1, 8, 5, padding=2) -> bn1 BatchNorm2d(8) -> ReLU -> MaxPool2d(2) -> conv2 Conv2d(8, 16, 5) ->
    bn2 BatchNorm2d(16) -> ReLU -> MaxPool2d(2) -> flatten -> fc1 Linear(400, 120) -> ReLU -> fc2 Linear(120, 84) ->
    ReLU -> fc3 Linear(84, 10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5, padding=2)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 5)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


MLP_DESCRIPTION = ("flatten -> fc1 Linear(784, 512) -> ReLU -> fc2 Linear(512, 512) -> ReLU -> fc3 Linear(512, 10) "
                   "(tools/make_fixtures.py MLP)")
LENET_BN_DESCRIPTION = ("conv1 Conv2d(1, 8, 5, padding=2) -> bn1 BatchNorm2d(8) -> ReLU -> MaxPool2d(2) -> "
                        "conv2 Conv2d(8, 16, 5) -> bn2 BatchNorm2d(16) -> ReLU -> MaxPool2d(2) -> flatten -> "
                        "fc1 Linear(400, 120) -> ReLU -> fc2 Linear(120, 84) -> ReLU -> fc3 Linear(84, 10) "
                        "(BatchNorm2d: eps 1e-05, momentum 0.1, affine, track_running_stats; training mode normalises "
                        "with the biased batch variance and updates running_var with the unbiased one; "
                        "tools/make_parity_fixtures.py LeNetBN)")


def sgd(params):
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4)


def adamw(lr):
    return lambda params: torch.optim.AdamW(params, lr=lr, weight_decay=1e-2)


# run: (model class, model seed name, description, optimizer factory, cosine schedule?, file holding init.*)
RUNS = {
    "mlp_sgd": (MLP, "mlp", MLP_DESCRIPTION, sgd, False, "mlp_sgd"),
    "mlp_adamw": (MLP, "mlp", MLP_DESCRIPTION, adamw(1e-3), False, "mlp_sgd"),
    "lenet_bn_adamw": (LeNetBN, "lenet_bn", LENET_BN_DESCRIPTION, adamw(2e-3), True, "lenet_bn_adamw"),
}


def state(model):
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def run(name, train_x, train_y, test_x):
    cls, seed_name, description, make_opt, cosine, init_file = RUNS[name]
    torch.manual_seed(seed_of(seed_name + ".init"))
    model = cls()
    init = state(model)
    opt = make_opt(model.parameters())
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS) if cosine else None
    g = torch.Generator().manual_seed(seed_of(name + ".batches"))
    batches = torch.randperm(len(train_x), generator=g)[:STEPS * BATCH].reshape(STEPS, BATCH).contiguous()
    losses, lrs = [], []
    model.train()
    for step in range(STEPS):
        idx = batches[step]
        opt.zero_grad()
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        loss.backward()
        lrs.append(float(opt.param_groups[0]["lr"]))
        losses.append(float(loss))
        opt.step()
        if sched is not None:
            sched.step()
    final = state(model)
    g = torch.Generator().manual_seed(seed_of(name + ".eval"))
    eval_indices = torch.randperm(len(test_x), generator=g)[:EVAL].contiguous()
    model.eval()
    with torch.no_grad():
        logits = model(test_x[eval_indices]).contiguous()

    tensors = {f"final.{k}": v for k, v in final.items()}
    if init_file == name:
        tensors.update({f"init.{k}": v for k, v in init.items()})
    tensors["batches"] = batches
    tensors["loss"] = torch.tensor(losses, dtype=torch.float64)
    tensors["lr"] = torch.tensor(lrs, dtype=torch.float64)
    tensors["eval.indices"] = eval_indices
    tensors["eval.logits"] = logits
    options = {k: v for k, v in opt.defaults.items()}
    metadata = {
        "run": name,
        "model": description,
        "optimizer": type(opt).__name__,
        "optimizer_options": json.dumps(options, sort_keys=True),
        "schedule": (f"torch.optim.lr_scheduler.CosineAnnealingLR(T_max={STEPS}, eta_min=0), sched.step() after "
                     "every optimizer step" if cosine else "constant"),
        "batch_size": BATCH,
        "steps": STEPS,
        "step": ("model.train(); per step: opt.zero_grad(); loss = F.cross_entropy(model(x), y) (mean); "
                 "loss.backward(); opt.step()" + ("; sched.step()" if cosine else "")),
        "input": "train images [batches[step]] pixel / 255, f32[32, 1, 28, 28]; labels int64",
        "dataset": "/usr/share/datasets/fashion-mnist (train-*-idx*-ubyte.gz, eval: t10k-*)",
        "init_file": f"{init_file}.safetensors",
        "init": f"default PyTorch init after torch.manual_seed({seed_of(seed_name + '.init')})",
        "eval": "model.eval() logits (BatchNorm uses running stats) on test images [eval.indices] after training",
        "torch": torch.__version__,
    }
    if cls is LeNetBN:
        metadata["note"] = (
            "conv1.bias and conv2.bias feed training-mode BatchNorm, which removes any per-channel constant: their "
            "true gradient is 0 and the computed one is rounding noise (~1e-9), which AdamW normalises into steps of "
            "up to ~lr. Their final values, and bn1/bn2.running_mean (which track them), are not reproducible to "
            "float precision by another implementation: compare them with atol ~sum(lr) (0.02), eval.logits with "
            "atol ~2e-3; the losses and every other key are unaffected.")
    return tensors, metadata, init, final, losses, lrs


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = os.path.join(root, "tests", "fixtures", "train")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    train_x, train_y = load("train")
    test_x, _ = load("t10k")
    for name in RUNS:
        tensors, metadata, init, final, losses, lrs = run(name, train_x, train_y, test_x)
        write_safetensors(os.path.join(out_dir, f"{name}.safetensors"), tensors, metadata)
        print(f"{name}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, lr {lrs[0]:.6g} -> {lrs[-1]:.6g}")
        for k in init:
            delta = (final[k].double() - init[k].double()).abs().max().item()
            print(f"  max |final - init| {k:24s} {delta:.6g}")


if __name__ == "__main__":
    main()
