#!/usr/bin/python3
"""Writes teeny's PyTorch reference fixtures (deterministic on one machine: running it twice gives
identical bytes; on another CPU, PyTorch's convolutions and matrix products may differ in the last
bits, so commit only the fixtures a change adds or means to change).

PyTorch is the independent reference: every expected value here is computed by PyTorch (1.13 on
Debian 12: run with /usr/bin/python3), so teeny's tests compare against it without needing PyTorch.

  tests/fixtures/ops/<case>.safetensors   one small case per op / attribute combination:
      in.<name>     the inputs (x; a, b; a, b, c for concat; q, k, v; indices)
      op.<slot>     the parameters and buffers, named as the PyTorch module's state_dict names them
                    (op.weight, op.bias, op.running_mean, op.running_var, op.num_batches_tracked)
      out           the expected output; ops with several outputs (split, chunk) have out.0, out.1, ...
      __metadata__  {"case": <name>, "torch": <the exact expression evaluated>, ["note": ...]}
    Expressions are evaluated with `torch`, `nn` (torch.nn), `F` (torch.nn.functional), `math`,
    the inputs and `op` (the module, or a namespace holding the op.* tensors) in scope. Where an
    expression is `nn.Something(...)(x)` the module is built, its norm parameters and running stats
    randomised (see NORM_INIT), put in eval mode and applied. Modules are always in eval mode.
    Float32 unless the case is about another dtype.
  tests/fixtures/ops/MANIFEST.txt         "<case>\t<torch expression>", one case a line.
  tests/fixtures/models/{mlp,lenet,resnet18}.safetensors
      the models' state_dict (PyTorch's keys) with seeded random init, in.x and out.logits (eval).
      resnet18's floating parameters and buffers are stored as BF16; its reference output was
      computed with exactly those (bf16-rounded) values.

Usage: /usr/bin/python3 tools/make_fixtures.py [repository root]   (default: the parent of tools/)
"""
import json
import math
import os
import struct
import sys
import types
import zlib

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS: one thread, fixed results
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- safetensors ------------------------------------------------------------------------------------

ST_DTYPES = {
    torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16", torch.int32: "I32",
    torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64",
}


def tensor_bytes(t):
    """Raw little-endian row-major bytes of t (bf16: the top 16 bits after round-to-nearest-even)."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        a = t.view(torch.int16).numpy()
    else:
        a = t.numpy()
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def safetensors_bytes(tensors, metadata):
    """The safetensors encoding: u64 header length, JSON header padded with spaces to a multiple of 8
    (entries sorted by name, "__metadata__" first), then the tensors' data back to back in name order."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}} if metadata else {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        raw = tensor_bytes(t)
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_safetensors(path, tensors, metadata):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors, metadata))


def seed_of(name):
    return zlib.crc32(name.encode("utf-8"))


# ---- the models (shared with train_fashion_mnist.py) ------------------------------------------------


class MLP(nn.Module):
    """Flatten -> fc1 Linear(784, 512) -> ReLU -> fc2 Linear(512, 512) -> ReLU -> fc3 Linear(512, 10)."""

    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 10)

    def forward(self, x):
        x = self.flatten(x)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class LeNet(nn.Module):
    """conv1 Conv2d(1, 8, 5, padding=2) -> ReLU -> MaxPool2d(2) -> conv2 Conv2d(8, 16, 5) -> ReLU ->
    MaxPool2d(2) -> flatten -> fc1 Linear(400, 120) -> ReLU -> fc2 Linear(120, 84) -> ReLU -> fc3 Linear(84, 10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5, padding=2)
        self.conv2 = nn.Conv2d(8, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision.models.resnet18's architecture and state_dict keys."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.layer3 = nn.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
        self.layer4 = nn.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():  # torchvision's init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


# ---- per-op cases -------------------------------------------------------------------------------------

NORM_TYPES = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm)
NORM_INIT = ("weight ~ U(0.5, 1.5), bias ~ N(0, 0.5^2), running_mean ~ N(0, 0.5^2), running_var ~ U(0.5, 2), "
             "num_batches_tracked = 7")


def randomize_norm(m):
    """Non-default affine parameters and running stats, so that every slot matters."""
    with torch.no_grad():
        if getattr(m, "weight", None) is not None:
            m.weight.uniform_(0.5, 1.5)
        if getattr(m, "bias", None) is not None:
            m.bias.normal_(0.0, 0.5)
        if getattr(m, "running_mean", None) is not None:
            m.running_mean.normal_(0.0, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.num_batches_tracked.fill_(7)


# Input generators, called in order after the case's seed is set.
def N(*shape, s=1.0, dtype=torch.float32):
    return lambda: torch.randn(*shape, dtype=dtype) * s


def U(lo, hi, *shape, dtype=torch.float32):
    return lambda: torch.rand(*shape, dtype=dtype) * (hi - lo) + lo


def I(lo, hi, *shape, dtype=torch.int64):
    return lambda: torch.randint(lo, hi, shape, dtype=dtype)


def T(values, dtype=torch.float32):
    return lambda: torch.tensor(values, dtype=dtype)


def G(fn):
    return fn


class Case:
    def __init__(self, name, expr, inputs, op=None, params=None, note=None):
        self.name, self.expr, self.inputs, self.op, self.params, self.note = name, expr, inputs, op, params, note


CASES = []


def add(name, expr, inputs, op=None, params=None, note=None):
    """expr is evaluated with the inputs and `op` in scope; op is a module expression (its state_dict
    becomes op.*) or None; params is a dict slot -> generator for functional cases (op.<slot>)."""
    assert all(c.name != name for c in CASES), name
    CASES.append(Case(name, expr, inputs, op, params, note))


def torch_string(c):
    if c.op is not None and c.expr.startswith("op("):
        return c.op + c.expr[2:]
    if c.op is not None:
        return f"op = {c.op}; {c.expr}"
    return c.expr


def run_case(c):
    torch.manual_seed(seed_of(c.name))
    inputs = {k: g() for k, g in c.inputs.items()}
    ns = {"torch": torch, "nn": nn, "F": F, "math": math}
    ns.update(inputs)
    state = {}
    note = c.note
    if c.op is not None:
        module = eval(c.op, ns)
        for m in module.modules():
            if isinstance(m, NORM_TYPES):
                randomize_norm(m)
                note = (note + "; " if note else "") + "random " + NORM_INIT
        module.eval()
        state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        ns["op"] = module
    elif c.params is not None:
        state = {k: g() for k, g in c.params.items()}
        ns["op"] = types.SimpleNamespace(**{k: v.clone() for k, v in state.items()})
    with torch.no_grad():
        out = eval(c.expr, ns)
    tensors = {f"in.{k}": v for k, v in inputs.items()}
    tensors.update({f"op.{k}": v for k, v in state.items()})
    if isinstance(out, (tuple, list)):
        tensors.update({f"out.{i}": o.contiguous() for i, o in enumerate(out)})
    else:
        tensors["out"] = out.contiguous()
    meta = {"case": c.name, "torch": torch_string(c)}
    if note:
        meta["note"] = note
    return tensors, meta


def define_cases():
    f64, i64, i32 = torch.float64, torch.int64, torch.int32

    # -- linear
    add("linear", "op(x)", {"x": N(4, 8)}, "nn.Linear(8, 5)")
    add("linear_no_bias", "op(x)", {"x": N(4, 8)}, "nn.Linear(8, 5, bias=False)")
    add("linear_3d", "op(x)", {"x": N(2, 3, 8)}, "nn.Linear(8, 5)")
    add("linear_1d", "op(x)", {"x": N(8)}, "nn.Linear(8, 5)")
    add("linear_f64", "op(x)", {"x": N(4, 8, dtype=f64)}, "nn.Linear(8, 5, dtype=torch.float64)",
        note="f64 input, parameters and output")
    add("linear_params_f64", "op.float()(x)", {"x": N(4, 8)}, "nn.Linear(8, 5, dtype=torch.float64)",
        note="parameters stored as F64; out uses them rounded to f32")
    add("linear_params_f16", "op.float()(x)", {"x": N(4, 8)}, "nn.Linear(8, 5).half()",
        note="parameters stored as F16; out uses them converted to f32")
    add("linear_params_bf16", "op.float()(x)", {"x": N(4, 8)}, "nn.Linear(8, 5).bfloat16()",
        note="parameters stored as BF16; out uses them converted to f32")

    # -- matmul
    add("matmul_1d_1d", "torch.matmul(a, b)", {"a": N(7), "b": N(7)})
    add("matmul_2d_1d", "torch.matmul(a, b)", {"a": N(3, 7), "b": N(7)})
    add("matmul_1d_2d", "torch.matmul(a, b)", {"a": N(7), "b": N(7, 4)})
    add("matmul_2d_2d", "torch.matmul(a, b)", {"a": N(3, 7), "b": N(7, 4)})
    add("matmul_1d_3d", "torch.matmul(a, b)", {"a": N(5), "b": N(2, 5, 3)})
    add("matmul_3d_1d", "torch.matmul(a, b)", {"a": N(2, 3, 5), "b": N(5)})
    add("matmul_3d_2d", "torch.matmul(a, b)", {"a": N(2, 3, 5), "b": N(5, 4)})
    add("matmul_batched_broadcast", "torch.matmul(a, b)", {"a": N(2, 1, 3, 5), "b": N(4, 5, 6)})
    add("matmul_batched_broadcast_both", "torch.matmul(a, b)", {"a": N(3, 1, 2, 4), "b": N(1, 2, 4, 5)})
    add("matmul_i64", "torch.matmul(a, b)", {"a": I(-5, 6, 3, 4), "b": I(-5, 6, 4, 2)})
    add("matmul_f64", "torch.matmul(a, b)", {"a": N(2, 3, 5, dtype=f64), "b": N(5, 4, dtype=f64)})

    # -- conv1d
    add("conv1d", "op(x)", {"x": N(2, 3, 10)}, "nn.Conv1d(3, 4, 3)")
    add("conv1d_stride2_pad1", "op(x)", {"x": N(2, 3, 11)}, "nn.Conv1d(3, 4, 3, stride=2, padding=1)")
    add("conv1d_dilation2", "op(x)", {"x": N(2, 3, 12)}, "nn.Conv1d(3, 4, 3, padding=2, dilation=2)")
    add("conv1d_groups2", "op(x)", {"x": N(2, 4, 9)}, "nn.Conv1d(4, 6, 3, groups=2)")
    add("conv1d_depthwise", "op(x)", {"x": N(2, 4, 9)}, "nn.Conv1d(4, 4, 5, padding=2, groups=4)")
    add("conv1d_no_bias", "op(x)", {"x": N(2, 3, 10)}, "nn.Conv1d(3, 5, 4, bias=False)")
    add("conv1d_all", "op(x)", {"x": N(2, 4, 17)},
        "nn.Conv1d(4, 6, 3, stride=3, padding=2, dilation=2, groups=2, bias=False)")
    add("conv1d_unbatched", "op(x)", {"x": N(3, 10)}, "nn.Conv1d(3, 4, 3, padding=1)")

    # -- conv2d
    add("conv2d_3x3_pad1", "op(x)", {"x": N(2, 3, 8, 8)}, "nn.Conv2d(3, 4, 3, padding=1)")
    add("conv2d_stride2", "op(x)", {"x": N(2, 3, 9, 9)}, "nn.Conv2d(3, 4, 3, stride=2)")
    add("conv2d_stride2_pad1_even", "op(x)", {"x": N(2, 3, 8, 8)}, "nn.Conv2d(3, 4, 3, stride=2, padding=1)")
    add("conv2d_dilation2", "op(x)", {"x": N(2, 3, 9, 9)}, "nn.Conv2d(3, 4, 3, padding=2, dilation=2)")
    add("conv2d_groups2", "op(x)", {"x": N(2, 4, 7, 7)}, "nn.Conv2d(4, 6, 3, padding=1, groups=2)")
    add("conv2d_depthwise", "op(x)", {"x": N(2, 4, 7, 7)}, "nn.Conv2d(4, 4, 3, padding=1, groups=4)")
    add("conv2d_depthwise_multiplier", "op(x)", {"x": N(2, 3, 6, 6)}, "nn.Conv2d(3, 6, 3, groups=3)")
    add("conv2d_1x1", "op(x)", {"x": N(2, 6, 5, 5)}, "nn.Conv2d(6, 5, 1)")
    add("conv2d_no_bias", "op(x)", {"x": N(2, 3, 6, 6)}, "nn.Conv2d(3, 4, 3, bias=False)")
    add("conv2d_nonsquare", "op(x)", {"x": N(2, 3, 7, 9)},
        "nn.Conv2d(3, 4, (3, 5), stride=(2, 1), padding=(1, 2))")
    add("conv2d_nonsquare_dilation", "op(x)", {"x": N(1, 2, 9, 10)},
        "nn.Conv2d(2, 3, (2, 3), stride=(1, 2), padding=(0, 1), dilation=(3, 2))")
    add("conv2d_5x5_pad2", "op(x)", {"x": N(2, 1, 12, 12)}, "nn.Conv2d(1, 8, 5, padding=2)")
    add("conv2d_unbatched", "op(x)", {"x": N(3, 6, 6)}, "nn.Conv2d(3, 4, 3, padding=1)")
    add("conv2d_f64", "op(x)", {"x": N(2, 3, 6, 6, dtype=f64)}, "nn.Conv2d(3, 4, 3, padding=1, dtype=torch.float64)",
        note="f64 input, parameters and output")

    # -- max_pool2d
    add("max_pool2d_k2", "op(x)", {"x": N(2, 3, 8, 8)}, "nn.MaxPool2d(2)")
    add("max_pool2d_k3_s2_p1", "op(x)", {"x": N(2, 3, 9, 9)}, "nn.MaxPool2d(3, stride=2, padding=1)")
    add("max_pool2d_k3_s2_p1_negative", "op(x)", {"x": U(-5.0, -1.0, 1, 2, 6, 6)}, "nn.MaxPool2d(3, stride=2, padding=1)",
        note="all inputs negative: padding must act as -inf, not 0")
    add("max_pool2d_dilation2", "op(x)", {"x": N(2, 3, 9, 9)}, "nn.MaxPool2d(3, stride=1, dilation=2)")
    add("max_pool2d_dilation_pad", "op(x)", {"x": N(1, 2, 8, 9)},
        "nn.MaxPool2d(3, stride=2, padding=1, dilation=(2, 1))")
    add("max_pool2d_ceil", "op(x)", {"x": N(2, 3, 7, 7)}, "nn.MaxPool2d(2, ceil_mode=True)")
    add("max_pool2d_ceil_k3_s2_p1", "op(x)", {"x": N(1, 2, 8, 8)},
        "nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)",
        note="ceil_mode with padding: output 5x5, the last window overhangs the padded input")
    add("max_pool2d_ceil_drop_last", "op(x)", {"x": N(1, 2, 7, 7)},
        "nn.MaxPool2d(2, stride=2, padding=1, ceil_mode=True)",
        note="ceil_mode rounds 3.5 up to 5 windows, but the 5th would start in the right padding: output 4x4")
    add("max_pool2d_nonsquare", "op(x)", {"x": N(2, 2, 7, 9)}, "nn.MaxPool2d((2, 3), stride=(1, 2), padding=(1, 1))")
    add("max_pool2d_unbatched", "op(x)", {"x": N(3, 8, 8)}, "nn.MaxPool2d(2)")

    # -- avg_pool2d
    add("avg_pool2d_k2", "op(x)", {"x": N(2, 3, 8, 8)}, "nn.AvgPool2d(2)")
    add("avg_pool2d_k3_s2_p1_include_pad", "op(x)", {"x": N(2, 3, 9, 9)},
        "nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=True)")
    add("avg_pool2d_k3_s2_p1_exclude_pad", "op(x)", {"x": N(2, 3, 9, 9)},
        "nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)")
    add("avg_pool2d_ceil", "op(x)", {"x": N(2, 3, 7, 7)}, "nn.AvgPool2d(2, ceil_mode=True)")
    add("avg_pool2d_ceil_pad_include", "op(x)", {"x": N(1, 2, 8, 8)},
        "nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=True)",
        note="the last window overhangs the padded input: its divisor counts padding but not the overhang")
    add("avg_pool2d_ceil_pad_exclude", "op(x)", {"x": N(1, 2, 8, 8)},
        "nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)")
    add("avg_pool2d_ceil_drop_last", "op(x)", {"x": N(1, 2, 7, 7)},
        "nn.AvgPool2d(2, stride=2, padding=1, ceil_mode=True)",
        note="output 4x4 (a 5th window would start in the right padding); edge divisors count the padding only")
    add("avg_pool2d_divisor_override", "op(x)", {"x": N(2, 3, 9, 9)},
        "nn.AvgPool2d(3, stride=2, padding=1, divisor_override=5)")
    add("avg_pool2d_nonsquare", "op(x)", {"x": N(2, 2, 7, 9)},
        "nn.AvgPool2d((2, 3), stride=(1, 2), padding=(1, 1), count_include_pad=False)")
    add("avg_pool2d_unbatched", "op(x)", {"x": N(3, 6, 6)}, "nn.AvgPool2d(3, stride=3)")

    # -- adaptive_avg_pool2d
    add("adaptive_avg_pool2d_1x1", "op(x)", {"x": N(2, 3, 7, 5)}, "nn.AdaptiveAvgPool2d(1)")
    add("adaptive_avg_pool2d_3x2", "op(x)", {"x": N(2, 3, 7, 5)}, "nn.AdaptiveAvgPool2d((3, 2))")
    add("adaptive_avg_pool2d_upsample", "op(x)", {"x": N(1, 2, 3, 4)}, "nn.AdaptiveAvgPool2d((5, 7))",
        note="output larger than the input")
    add("adaptive_avg_pool2d_unbatched", "op(x)", {"x": N(3, 6, 6)}, "nn.AdaptiveAvgPool2d((4, 4))")

    # -- batch norm (eval: running stats)
    add("batch_norm1d_nc", "op(x)", {"x": N(4, 6)}, "nn.BatchNorm1d(6).eval()")
    add("batch_norm1d_ncl", "op(x)", {"x": N(3, 6, 5)}, "nn.BatchNorm1d(6).eval()")
    add("batch_norm2d", "op(x)", {"x": N(2, 5, 4, 4)}, "nn.BatchNorm2d(5).eval()")
    add("batch_norm2d_eps", "op(x)", {"x": N(2, 5, 4, 4)}, "nn.BatchNorm2d(5, eps=0.1, momentum=None).eval()")
    add("batch_norm2d_no_affine", "op(x)", {"x": N(2, 5, 4, 4)}, "nn.BatchNorm2d(5, affine=False).eval()")
    add("batch_norm2d_no_running_stats", "op(x)", {"x": N(3, 4, 3, 3, s=2.0)},
        "nn.BatchNorm2d(4, track_running_stats=False).eval()",
        note="without running stats, eval mode normalises with the batch's statistics (biased variance)")
    add("batch_norm1d_no_running_stats", "op(x)", {"x": N(5, 3, 4)},
        "nn.BatchNorm1d(3, affine=False, track_running_stats=False).eval()",
        note="without running stats, eval mode normalises with the batch's statistics (biased variance)")
    add("batch_norm3d", "op(x)", {"x": N(2, 3, 3, 4, 4)}, "nn.BatchNorm3d(3).eval()")

    # -- layer norm
    add("layer_norm_last", "op(x)", {"x": N(2, 3, 8, s=2.0)}, "nn.LayerNorm(8)")
    add("layer_norm_last2", "op(x)", {"x": N(2, 3, 8)}, "nn.LayerNorm([3, 8])")
    add("layer_norm_no_affine", "op(x)", {"x": N(2, 3, 8)}, "nn.LayerNorm(8, elementwise_affine=False)")
    add("layer_norm_eps", "op(x)", {"x": N(4, 6, s=0.05)}, "nn.LayerNorm(6, eps=0.001)",
        note="small-variance input so that eps matters")
    add("layer_norm_no_bias", "F.layer_norm(x, [8], op.weight, None, 1e-05)", {"x": N(2, 3, 8)},
        params={"weight": U(0.5, 1.5, 8)}, note="nn.LayerNorm(8, bias=False) (PyTorch >= 2.1) written functionally")
    add("layer_norm_f64", "op(x)", {"x": N(3, 5, dtype=f64)}, "nn.LayerNorm(5, dtype=torch.float64)")

    # -- rms norm (torch 1.13 has no nn.RMSNorm: written out as its definition)
    add("rms_norm_last", "x / torch.sqrt(x.pow(2).mean(dim=(-1,), keepdim=True) + 1e-06) * op.weight",
        {"x": N(2, 3, 8, s=2.0)}, params={"weight": U(0.5, 1.5, 8)}, note="nn.RMSNorm(8, eps=1e-06)")
    add("rms_norm_eps_none", "x / torch.sqrt(x.pow(2).mean(dim=(-1,), keepdim=True) + torch.finfo(torch.float32).eps) * op.weight",
        {"x": N(2, 3, 8, s=1e-3)}, params={"weight": U(0.5, 1.5, 8)},
        note="nn.RMSNorm(8) (eps=None: float32's epsilon); small input so that eps matters")
    add("rms_norm_last2", "x / torch.sqrt(x.pow(2).mean(dim=(-2, -1), keepdim=True) + 1e-05) * op.weight",
        {"x": N(2, 3, 8)}, params={"weight": U(0.5, 1.5, 3, 8)}, note="nn.RMSNorm([3, 8], eps=1e-05)")
    add("rms_norm_no_affine", "x / torch.sqrt(x.pow(2).mean(dim=(-1,), keepdim=True) + 1e-06)",
        {"x": N(4, 6)}, note="nn.RMSNorm(6, eps=1e-06, elementwise_affine=False)")
    add("rms_norm_eps_small_input", "x / torch.sqrt(x.pow(2).mean(dim=(-1,), keepdim=True) + 0.001) * op.weight",
        {"x": N(3, 6, s=0.02)}, params={"weight": U(0.5, 1.5, 6)},
        note="nn.RMSNorm(6, eps=0.001); small input so that eps matters")
    add("rms_norm_f64_eps_none", "x / torch.sqrt(x.pow(2).mean(dim=(-1,), keepdim=True) + torch.finfo(torch.float64).eps) * op.weight",
        {"x": N(2, 5, dtype=f64, s=1e-7)}, params={"weight": U(0.5, 1.5, 5, dtype=f64)},
        note="nn.RMSNorm(5, dtype=torch.float64) (eps=None: float64's epsilon); tiny input so that eps matters")

    # -- group norm
    add("group_norm", "op(x)", {"x": N(2, 6, 4, 4)}, "nn.GroupNorm(2, 6)")
    add("group_norm_no_affine", "op(x)", {"x": N(2, 6, 5)}, "nn.GroupNorm(3, 6, affine=False)")
    add("group_norm_per_channel_eps", "op(x)", {"x": N(3, 6, 4, s=0.05)}, "nn.GroupNorm(6, 6, eps=0.001)")
    add("group_norm_one_group", "op(x)", {"x": N(2, 4, 3, 3)}, "nn.GroupNorm(1, 4)")
    add("group_norm_2d_input", "op(x)", {"x": N(3, 8)}, "nn.GroupNorm(4, 8)")

    # -- embedding
    add("embedding", "op(indices)", {"indices": I(0, 10, 2, 5)}, "nn.Embedding(10, 4)")
    add("embedding_padding_idx", "op(indices)", {"indices": T([[0, 3, 0, 9], [2, 0, 5, 1]], i64)},
        "nn.Embedding(10, 4, padding_idx=0)", note="the padding row of op.weight is zero (PyTorch's init)")
    add("embedding_padding_idx_negative", "op(indices)", {"indices": T([9, 3, 9, 0], i64)},
        "nn.Embedding(10, 3, padding_idx=-1)")
    add("embedding_i32", "op(indices)", {"indices": I(0, 7, 3, 2, dtype=i32)}, "nn.Embedding(7, 5)")
    add("embedding_scalar", "op(indices)", {"indices": T(4, i64)}, "nn.Embedding(6, 3)")
    add("embedding_f64", "op(indices)", {"indices": I(0, 6, 4)}, "nn.Embedding(6, 3, dtype=torch.float64)")

    # -- dropout (eval: identity)
    add("dropout", "op(x)", {"x": N(4, 6)}, "nn.Dropout(p=0.3).eval()")
    add("dropout_p1", "op(x)", {"x": N(2, 3, 4)}, "nn.Dropout(p=1.0).eval()")

    # -- activations
    act = G(lambda: torch.cat([torch.linspace(-10.0, 10.0, 41), torch.randn(23) * 3.0]).reshape(4, 16))
    add("relu", "F.relu(x)", {"x": act})
    add("leaky_relu", "F.leaky_relu(x)", {"x": act}, note="default negative_slope 0.01")
    add("leaky_relu_0_2", "F.leaky_relu(x, negative_slope=0.2)", {"x": act})
    add("gelu", "F.gelu(x)", {"x": act})
    add("gelu_tanh", "F.gelu(x, approximate='tanh')", {"x": act})
    add("gelu_f64", "F.gelu(x)", {"x": G(lambda: torch.linspace(-6.0, 6.0, 25, dtype=torch.float64))})
    add("silu", "F.silu(x)", {"x": act})
    add("sigmoid", "torch.sigmoid(x)", {"x": G(lambda: torch.cat([torch.linspace(-100.0, 100.0, 21), torch.randn(11) * 4]))})
    add("tanh", "torch.tanh(x)", {"x": act})
    add("softplus", "F.softplus(x)", {"x": G(lambda: torch.cat([torch.linspace(-30.0, 30.0, 31), torch.tensor([19.5, 20.0, 20.5])]))},
        note="default beta 1, threshold 20")
    add("softplus_beta2_threshold5", "F.softplus(x, beta=2.0, threshold=5.0)",
        {"x": G(lambda: torch.cat([torch.linspace(-4.0, 6.0, 41), torch.tensor([2.49, 2.5, 2.51])]))},
        note="beta*x spans the threshold; beta*x == threshold exactly at x=2.5 (not the identity there)")
    add("elu", "F.elu(x)", {"x": act})
    add("elu_alpha0_5", "F.elu(x, alpha=0.5)", {"x": act})
    add("hardswish", "F.hardswish(x)", {"x": G(lambda: torch.cat([torch.linspace(-5.0, 5.0, 41), torch.tensor([-3.0, 3.0, 0.0])]))})
    add("hardsigmoid", "F.hardsigmoid(x)", {"x": G(lambda: torch.cat([torch.linspace(-5.0, 5.0, 41), torch.tensor([-3.0, 3.0, 0.0, float("nan")])]))},
        note="both kinks, and NaN (which stays NaN)")
    kinks = torch.tensor([-0.75, 0.75, 0.5, 0.0, float("nan")])
    add("threshold", "F.threshold(x, 0.5, -2.0)", {"x": G(lambda: torch.cat([torch.linspace(-2.0, 2.0, 41), kinks]))},
        note="x == threshold takes the value; NaN stays NaN")
    add("hardshrink", "F.hardshrink(x, 0.75)", {"x": G(lambda: torch.cat([torch.linspace(-2.0, 2.0, 41), kinks]))},
        note="both kinks are zeroed; NaN stays NaN")
    add("softshrink", "F.softshrink(x, 0.75)", {"x": G(lambda: torch.cat([torch.linspace(-2.0, 2.0, 41), kinks]))},
        note="both kinks give 0, and so does NaN (PyTorch 1.13)")

    # -- softmax / log_softmax (3-D, with large values)
    def soft_input():
        x = torch.randn(3, 4, 5) * 10.0
        x[0, 0, :] += 1000.0
        x[1, :, 2] -= 1000.0
        x[2, 1, 1] = 3000.0
        return x
    for fn in ("softmax", "log_softmax"):
        for axis, tag in ((-1, "axis_neg1"), (0, "axis0"), (1, "axis1")):
            add(f"{fn}_{tag}", f"torch.{fn}(x, dim={axis})", {"x": G(soft_input)})
        add(f"{fn}_axis_neg2", f"torch.{fn}(x, dim=-2)", {"x": N(2, 3, 4)})
        add(f"{fn}_1d", f"torch.{fn}(x, dim=0)", {"x": N(7, s=5.0)})
    add("softmax_f64", "torch.softmax(x, dim=-1)", {"x": N(3, 6, dtype=f64, s=20.0)})

    # -- binary arithmetic with broadcasting
    bin_inputs = {
        "add": (N(2, 3, 4), N(3, 1)),
        "sub": (N(2, 3, 4), N(3, 1)),
        "mul": (N(2, 3, 4), N(3, 1)),
        "div": (N(2, 3, 4), U(0.5, 2.0, 3, 1)),
        "pow": (U(0.5, 2.0, 2, 3, 4), U(-2.0, 2.0, 3, 1)),
        "maximum": (N(2, 3, 4), N(3, 1)),
        "minimum": (N(2, 3, 4), N(3, 1)),
    }
    shapes = {"bcast": (3, 1), "vec": (4,), "scalar": (1,)}
    for op, (ga, gb) in bin_inputs.items():
        fn = f"torch.{op}(a, b)"
        for tag, bshape in shapes.items():
            lo_hi = {"div": (0.5, 2.0), "pow": (-2.0, 2.0)}.get(op)
            gb2 = U(*lo_hi, *bshape) if lo_hi else N(*bshape)
            if op == "div":  # divisors of both signs, away from zero
                gb2 = G(lambda s=bshape: (torch.rand(*s) * 1.5 + 0.5) * torch.where(torch.rand(*s) < 0.5, -1.0, 1.0))
            add(f"{op}_{tag}", fn, {"a": ga, "b": gb2})
        # both sides broadcast: [2, 1, 4] (op) [3, 1] -> [2, 3, 4]
        a2 = U(0.5, 2.0, 2, 1, 4) if op == "pow" else N(2, 1, 4)
        b2 = U(-2.0, 2.0, 3, 1) if op == "pow" else (U(0.5, 2.0, 3, 1) if op == "div" else N(3, 1))
        add(f"{op}_both", fn, {"a": a2, "b": b2})
        # the smaller operand first: [3, 1] (op) [2, 3, 4]
        a3 = U(0.5, 2.0, 3, 1) if op == "pow" else N(3, 1)
        b3 = U(-2.0, 2.0, 2, 3, 4) if op == "pow" else (U(0.5, 2.0, 2, 3, 4) if op == "div" else N(2, 3, 4))
        add(f"{op}_lhs_bcast", fn, {"a": a3, "b": b3})
    add("pow_negative_base_integer_exponent", "torch.pow(a, b)",
        {"a": N(2, 3, 4), "b": G(lambda: torch.tensor([0.0, 1.0, 2.0, 3.0]))},
        note="negative bases with integral float exponents are real")
    add("pow_square_root", "torch.pow(a, b)", {"a": U(0.0, 4.0, 3, 4), "b": T([0.5])})
    add("maximum_nan", "torch.maximum(a, b)", {"a": T([1.0, float("nan"), -2.0, float("nan")]),
                                              "b": T([float("nan"), 3.0, 5.0, float("nan")])},
        note="NaN propagates")
    add("minimum_nan", "torch.minimum(a, b)", {"a": T([1.0, float("nan"), -2.0, float("nan")]),
                                              "b": T([float("nan"), 3.0, 5.0, float("nan")])},
        note="NaN propagates")
    add("fmod", "torch.fmod(a, b)", {"a": N(2, 3, 4, s=5.0),
                                     "b": G(lambda: (torch.rand(3, 1) * 1.5 + 0.5) * torch.tensor([[1.0], [-1.0], [1.0]]))},
        note="dividends and divisors of both signs: the result has the dividend's")
    add("div_f64", "torch.div(a, b)", {"a": N(2, 3, dtype=f64), "b": U(0.5, 2.0, 3, dtype=f64)})
    add("add_f64", "torch.add(a, b)", {"a": N(2, 3, 4, dtype=f64), "b": N(4, dtype=f64)})
    for op in ("add", "sub", "mul", "maximum", "minimum"):
        add(f"{op}_i64", f"torch.{op}(a, b)", {"a": I(-50, 50, 2, 3, 4), "b": I(-50, 50, 3, 1)})
    add("pow_i64", "torch.pow(a, b)", {"a": I(-6, 7, 2, 3, 4), "b": I(0, 4, 3, 1)})
    add("mul_i32", "torch.mul(a, b)", {"a": I(-1000, 1000, 3, 4, dtype=i32), "b": I(-1000, 1000, 4, dtype=i32)})

    # -- unary math
    add("exp", "torch.exp(x)", {"x": N(3, 5, s=3.0)})
    add("log", "torch.log(x)", {"x": U(0.01, 10.0, 3, 5)})
    add("sqrt", "torch.sqrt(x)", {"x": U(0.0, 10.0, 3, 5)})
    add("abs", "torch.abs(x)", {"x": N(3, 5)})
    add("neg", "torch.neg(x)", {"x": N(3, 5)})
    add("reciprocal", "torch.reciprocal(x)",
        {"x": G(lambda: (torch.rand(3, 5) * 4 + 0.25) * torch.where(torch.rand(3, 5) < 0.5, -1.0, 1.0))})
    add("abs_i64", "torch.abs(x)", {"x": I(-100, 100, 3, 5)})
    add("neg_i64", "torch.neg(x)", {"x": I(-100, 100, 3, 5)})
    add("exp_f64", "torch.exp(x)", {"x": N(3, 5, dtype=f64, s=3.0)})

    # -- reductions (max is torch.amax)
    for op in ("sum", "mean", "amax"):
        name = "max" if op == "amax" else op
        add(f"{name}_axis1", f"torch.{op}(x, dim=1)", {"x": N(2, 3, 4)})
        add(f"{name}_axis_neg1_keepdim", f"torch.{op}(x, dim=-1, keepdim=True)", {"x": N(2, 3, 4)})
        add(f"{name}_axes_0_2", f"torch.{op}(x, dim=(0, 2))", {"x": N(2, 3, 4)})
        add(f"{name}_axes_0_2_keepdim", f"torch.{op}(x, dim=(0, 2), keepdim=True)", {"x": N(2, 3, 4)})
        add(f"{name}_all", f"torch.{op}(x)", {"x": N(2, 3, 4)})
        add(f"{name}_all_keepdim", f"torch.{op}(x, dim=(0, 1, 2), keepdim=True)", {"x": N(2, 3, 4)})
    add("sum_large", "torch.sum(x, dim=1)", {"x": U(0.0, 1.0, 3, 1000)}, note="long reduction (float accumulation)")
    add("mean_large", "torch.mean(x)", {"x": U(0.0, 1.0, 4000)})
    add("sum_i64", "torch.sum(x, dim=1)", {"x": I(-100, 100, 2, 3, 4)})
    add("sum_i32_all", "torch.sum(x)", {"x": I(-100, 100, 3, 4, dtype=i32)}, note="sum of i32 is i64")
    add("sum_bool_all", "torch.sum(x)", {"x": G(lambda: torch.rand(3, 5) < 0.4)}, note="sum of bool is i64")
    add("max_i64", "torch.amax(x, dim=(0, 2))", {"x": I(-100, 100, 2, 3, 4)})
    add("sum_f64", "torch.sum(x, dim=-1)", {"x": N(3, 7, dtype=f64)})

    # -- flatten, reshape, transpose, permute
    add("flatten_default", "nn.Flatten()(x)", {"x": N(2, 3, 4, 5)}, note="start_dim=1, end_dim=-1 (teeny's default)")
    add("flatten_start0", "torch.flatten(x)", {"x": N(2, 3, 4)})
    add("flatten_1_2", "torch.flatten(x, start_dim=1, end_dim=2)", {"x": N(2, 3, 4, 5)})
    add("flatten_neg", "torch.flatten(x, start_dim=-3, end_dim=-2)", {"x": N(2, 3, 4, 5)})
    add("flatten_same_dim", "torch.flatten(x, start_dim=2, end_dim=2)", {"x": N(2, 3, 4)})
    add("flatten_scalar", "torch.flatten(x)", {"x": T(3.5)}, note="a scalar becomes [1]")
    add("reshape", "torch.reshape(x, (4, 6))", {"x": N(2, 3, 4)})
    add("reshape_infer", "torch.reshape(x, (4, -1))", {"x": N(2, 3, 4)})
    add("reshape_infer_middle", "torch.reshape(x, (2, -1, 2))", {"x": N(2, 3, 4)})
    add("reshape_flat", "torch.reshape(x, (-1,))", {"x": N(2, 3, 4)})
    add("reshape_i64", "torch.reshape(x, (3, -1))", {"x": I(0, 100, 2, 6)})
    add("transpose", "torch.transpose(x, 0, 2)", {"x": N(2, 3, 4)})
    add("transpose_neg", "torch.transpose(x, -1, -2)", {"x": N(2, 3, 4, 5)})
    add("permute", "x.permute(2, 0, 3, 1)", {"x": N(2, 3, 4, 5)})
    add("permute_neg", "x.permute(-1, 0, 1)", {"x": N(2, 3, 4)})

    # -- concat, split, chunk, slice
    add("concat_axis0", "torch.cat([a, b, c], dim=0)", {"a": N(2, 3, 4), "b": N(1, 3, 4), "c": N(3, 3, 4)})
    add("concat_axis1", "torch.cat([a, b, c], dim=1)", {"a": N(2, 3, 4), "b": N(2, 1, 4), "c": N(2, 2, 4)})
    add("concat_axis_neg1", "torch.cat([a, b, c], dim=-1)", {"a": N(2, 3, 4), "b": N(2, 3, 2), "c": N(2, 3, 1)})
    add("concat_one", "torch.cat([a], dim=0)", {"a": N(2, 3)})
    add("concat_i64", "torch.cat([a, b], dim=1)", {"a": I(0, 9, 2, 2), "b": I(0, 9, 2, 3)})
    add("split_axis1", "torch.split(x, [2, 3, 1], dim=1)", {"x": N(2, 6, 3)})
    add("split_axis0", "torch.split(x, [1, 3], dim=0)", {"x": N(4, 5)})
    add("split_neg_axis_zero_piece", "torch.split(x, [2, 0, 3], dim=-1)", {"x": N(2, 3, 5)},
        note="a zero-sized piece")
    add("chunk_even", "torch.chunk(x, 3, dim=0)", {"x": N(6, 4)})
    add("chunk_uneven", "torch.chunk(x, 4, dim=1)", {"x": N(2, 5, 3)}, note="5 into 4 chunks: sizes 2, 2, 1")
    add("chunk_fewer", "torch.chunk(x, 4, dim=-1)", {"x": N(3, 6)}, note="6 into 4 chunks: sizes 2, 2, 2 (3 pieces)")
    add("slice_neg_start", "x[:, -3:]", {"x": N(2, 10)})
    add("slice_step2", "x[:, 1:8:2]", {"x": N(2, 10)})
    add("slice_start_step2", "x[1::2]", {"x": N(7, 3)})
    add("slice_neg_end", "x[..., 1:-1]", {"x": N(2, 3, 6)})
    add("slice_neg_both_step3", "x[:, -8:-1:3, :]", {"x": N(2, 10, 2)})
    add("slice_clamped", "x[:, -100:100:3]", {"x": N(2, 10)}, note="out-of-range bounds clamp")
    add("slice_empty", "x[:, 5:2]", {"x": N(2, 10)}, note="end before start: an empty result [2, 0]")

    # -- pad
    add("pad_constant_2d", "F.pad(x, (1, 2), mode='constant', value=1.5)", {"x": N(3, 4)})
    add("pad_constant_2d_both", "F.pad(x, (1, 2, 2, 0), mode='constant', value=1.5)", {"x": N(3, 4)})
    add("pad_constant_4d", "F.pad(x, (1, 2, 0, 1), mode='constant', value=1.5)", {"x": N(2, 3, 4, 5)})
    add("pad_constant_default", "F.pad(x, (2, 2, 1, 1))", {"x": N(1, 2, 3, 3)}, note="value 0")
    add("pad_constant_3dims", "F.pad(x, (1, 0, 0, 2, 1, 1), value=-1.0)", {"x": N(2, 2, 3, 2)})
    add("pad_constant_negative", "F.pad(x, (-1, 2, 1, -2), value=1.5)", {"x": N(2, 4, 5)},
        note="negative pads crop")
    add("pad_reflect_2d", "F.pad(x, (2, 3), mode='reflect')", {"x": N(3, 5)}, note="[C, W] input")
    add("pad_reflect_3d", "F.pad(x, (3, 1), mode='reflect')", {"x": N(2, 3, 5)})
    add("pad_reflect_4d", "F.pad(x, (2, 1, 1, 3), mode='reflect')", {"x": N(2, 3, 5, 6)})
    add("pad_reflect_5d", "F.pad(x, (1, 2, 1, 1, 2, 0), mode='reflect')", {"x": N(1, 2, 3, 4, 5)})
    add("pad_replicate_2d", "F.pad(x, (2, 3), mode='replicate')", {"x": N(3, 5)}, note="[C, W] input")
    add("pad_replicate_3d", "F.pad(x, (1, 4), mode='replicate')", {"x": N(2, 3, 4)})
    add("pad_replicate_4d", "F.pad(x, (2, 1, 3, 0), mode='replicate')", {"x": N(2, 3, 4, 5)})
    add("pad_replicate_3d_unbatched_hw", "F.pad(x, (1, 2, 2, 1), mode='replicate')", {"x": N(3, 4, 5)},
        note="[C, H, W] input")
    add("pad_replicate_5d", "F.pad(x, (1, 2, 1, 1, 2, 0), mode='replicate')", {"x": N(1, 2, 3, 4, 5)})

    # -- upsample (nearest)
    add("upsample_nearest_2", "op(x)", {"x": N(2, 3, 4, 5)}, "nn.Upsample(scale_factor=2, mode='nearest')")
    add("upsample_nearest_3", "op(x)", {"x": N(1, 2, 3, 4)}, "nn.Upsample(scale_factor=3, mode='nearest')")
    add("upsample_nearest_2x3", "op(x)", {"x": N(1, 2, 3, 4)}, "nn.Upsample(scale_factor=(2, 3), mode='nearest')")
    add("upsample_nearest_fractional", "op(x)", {"x": N(1, 2, 5, 4)}, "nn.Upsample(scale_factor=(1.5, 2.5), mode='nearest')",
        note="output floor(5*1.5)=7 x floor(4*2.5)=10; source index floor(dst * (1/scale)) in float32")

    # -- cast
    add("cast_f32_f64", "x.to(torch.float64)", {"x": N(3, 4)})
    add("cast_f32_i64", "x.to(torch.int64)",
        {"x": T([-2.7, -2.5, -0.5, -0.0, 0.5, 0.99, 2.5, 2.7, 1e6 + 0.5, -123456.75, 3e9, -3e9])},
        note="truncation toward zero")
    add("cast_f32_i32", "x.to(torch.int32)", {"x": T([-2.7, -0.5, 0.5, 2.5, 1e6 + 0.5, -123456.75])})
    add("cast_f32_u8", "x.to(torch.uint8)", {"x": T([0.0, 0.5, 1.7, 127.5, 200.9, 255.0])})
    add("cast_i64_f32", "x.to(torch.float32)",
        {"x": T([0, -1, 7, 16777216, 16777217, 16777219, -16777217, 123456789, 2 ** 53 + 1, -(2 ** 62)], torch.int64)},
        note="large values round to nearest even")
    add("cast_i32_i64", "x.to(torch.int64)", {"x": I(-10 ** 9, 10 ** 9, 6, dtype=i32)})
    add("cast_i64_i32", "x.to(torch.int32)", {"x": I(-10 ** 9, 10 ** 9, 6)})
    add("cast_f64_f32", "x.to(torch.float32)", {"x": N(3, 4, dtype=f64)})
    add("cast_f32_f16", "x.to(torch.float16)",
        {"x": G(lambda: torch.cat([torch.randn(8), torch.tensor([65504.0, 65520.0, 70000.0, -1e5, 1e-5, 6e-8, 2e-8, 1.0009765625 + 2 ** -11])]))},
        note="overflow to inf, subnormals, round-to-nearest-even")
    add("cast_f32_bf16", "x.to(torch.bfloat16)",
        {"x": G(lambda: torch.cat([torch.randn(8), torch.tensor([1.00390625, 1.01171875, 3.0e38, 3.4e38, -1e-39, 1.0, 0.0])]))},
        note="round-to-nearest-even (1.00390625 and 1.01171875 are ties)")
    add("cast_f16_f32", "x.to(torch.float32)", {"x": G(lambda: torch.randn(3, 4).half())})
    add("cast_bf16_f32", "x.to(torch.float32)", {"x": G(lambda: torch.randn(3, 4).bfloat16())})
    add("cast_f32_bool", "x.to(torch.bool)", {"x": T([0.0, -0.0, 0.5, -2.0, 1e-30, float("nan")])})
    add("cast_bool_f32", "x.to(torch.float32)", {"x": T([True, False, True], torch.bool)})
    add("cast_i64_f64", "x.to(torch.float64)", {"x": T([0, -5, 2 ** 53 + 1, 123456789012], torch.int64)})

    # -- attention (scaled dot-product attention written out for torch 1.13)
    plain = "torch.softmax(q @ k.transpose(-2, -1) * {scale}, dim=-1) @ v"
    causal = ("torch.softmax(q @ k.transpose(-2, -1) * {scale} + torch.zeros(q.size(-2), k.size(-2))"
              ".masked_fill(~torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril(), float('-inf')), dim=-1) @ v")
    default_scale = "(1.0 / math.sqrt(q.size(-1)))"
    add("attention", plain.format(scale=default_scale), {"q": N(2, 4, 8), "k": N(2, 6, 8), "v": N(2, 6, 5)},
        note="F.scaled_dot_product_attention(q, k, v); L=4 != S=6, Ev=5 != E=8")
    add("attention_causal", causal.format(scale=default_scale), {"q": N(2, 5, 8), "k": N(2, 5, 8), "v": N(2, 5, 8)},
        note="F.scaled_dot_product_attention(q, k, v, is_causal=True)")
    add("attention_causal_l_lt_s", causal.format(scale=default_scale), {"q": N(2, 3, 4), "k": N(2, 6, 4), "v": N(2, 6, 4)},
        note="F.scaled_dot_product_attention(q, k, v, is_causal=True); L=3 < S=6: top-left aligned mask")
    add("attention_causal_l_gt_s", causal.format(scale=default_scale), {"q": N(1, 6, 4), "k": N(1, 3, 4), "v": N(1, 3, 2)},
        note="F.scaled_dot_product_attention(q, k, v, is_causal=True); L=6 > S=3: top-left aligned mask")
    add("attention_scale", plain.format(scale="0.3"), {"q": N(2, 4, 8), "k": N(2, 6, 8), "v": N(2, 6, 8)},
        note="F.scaled_dot_product_attention(q, k, v, scale=0.3)")
    add("attention_causal_scale", causal.format(scale="0.3"), {"q": N(3, 4, 6), "k": N(3, 4, 6), "v": N(3, 4, 6)},
        note="F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)")
    add("attention_heads", plain.format(scale=default_scale),
        {"q": N(2, 3, 4, 8), "k": N(2, 3, 6, 8), "v": N(2, 3, 6, 8)},
        note="F.scaled_dot_product_attention(q, k, v); [batch, heads, L, E]")
    add("attention_batch_broadcast", plain.format(scale=default_scale),
        {"q": N(2, 1, 4, 8), "k": N(3, 6, 8), "v": N(1, 6, 5)},
        note="F.scaled_dot_product_attention(q, k, v); batch dims [2, 1], [3], [1] broadcast to [2, 3]")
    add("attention_large_logits", plain.format(scale="1.0"), {"q": N(2, 4, 8, s=10.0), "k": N(2, 5, 8, s=10.0), "v": N(2, 5, 3)},
        note="F.scaled_dot_product_attention(q, k, v, scale=1.0); logits in the hundreds (stability)")
    add("attention_2d", plain.format(scale=default_scale), {"q": N(4, 8), "k": N(6, 8), "v": N(6, 3)},
        note="F.scaled_dot_product_attention(q, k, v) without batch dims")


# ---- models ---------------------------------------------------------------------------------------------


def model_fixtures():
    out = {}

    torch.manual_seed(seed_of("mlp"))
    mlp = MLP().eval()
    x = torch.rand(3, 1, 28, 28)
    with torch.no_grad():
        logits = mlp(x)
    out["mlp"] = (mlp.state_dict(), x, logits, "MLP: Flatten -> fc1 Linear(784, 512) -> ReLU -> fc2 Linear(512, 512) "
                  "-> ReLU -> fc3 Linear(512, 10); random init (seeded)")

    torch.manual_seed(seed_of("lenet"))
    lenet = LeNet().eval()
    x = torch.rand(3, 1, 28, 28)
    with torch.no_grad():
        logits = lenet(x)
    out["lenet"] = (lenet.state_dict(), x, logits, "LeNet: conv1 Conv2d(1, 8, 5, padding=2) -> ReLU -> MaxPool2d(2) -> "
                    "conv2 Conv2d(8, 16, 5) -> ReLU -> MaxPool2d(2) -> flatten -> fc1 Linear(400, 120) -> ReLU -> "
                    "fc2 Linear(120, 84) -> ReLU -> fc3 Linear(84, 10); random init (seeded)")

    torch.manual_seed(seed_of("resnet18"))
    resnet = ResNet18()
    with torch.no_grad():
        for m in resnet.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(100)
        resnet.to(torch.bfloat16).to(torch.float32)  # the reference uses exactly the stored bf16 values
    resnet.eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        logits = resnet(x)
    state = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in resnet.state_dict().items()}
    out["resnet18"] = (state, x, logits, "torchvision ResNet-18 architecture (BasicBlock [2, 2, 2, 2], fc 512 -> 1000); "
                       "torchvision init, then BN weight ~ U(0.5, 1.5), bias ~ N(0, 0.1^2), running_mean ~ N(0, 0.1^2), "
                       "running_var ~ U(0.5, 1.5), num_batches_tracked = 100; floating parameters and buffers stored "
                       "as BF16, out.logits computed in f32 with exactly those values")
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    define_cases()
    ops_dir = os.path.join(root, "tests", "fixtures", "ops")
    os.makedirs(ops_dir, exist_ok=True)
    for f in os.listdir(ops_dir):  # no stale cases
        if f.endswith(".safetensors"):
            os.remove(os.path.join(ops_dir, f))
    manifest = []
    total = 0
    for c in CASES:
        tensors, meta = run_case(c)
        for k, t in tensors.items():
            assert t.numel() <= 5000, f"{c.name}: {k} has {t.numel()} elements"
        data = safetensors_bytes(tensors, meta)
        total += len(data)
        with open(os.path.join(ops_dir, c.name + ".safetensors"), "wb") as f:
            f.write(data)
        manifest.append(f"{c.name}\t{meta['torch']}\n")
    with open(os.path.join(ops_dir, "MANIFEST.txt"), "w") as f:
        f.writelines(manifest)
    print(f"{len(CASES)} op cases, {total} bytes in {ops_dir}")

    models_dir = os.path.join(root, "tests", "fixtures", "models")
    for name, (state, x, logits, description) in model_fixtures().items():
        tensors = dict(state)
        tensors["in.x"] = x
        tensors["out.logits"] = logits
        path = os.path.join(models_dir, name + ".safetensors")
        write_safetensors(path, tensors, {"model": name, "torch": description})
        print(f"{name}: {os.path.getsize(path)} bytes, logits {list(logits.shape)} "
              f"range [{logits.min().item():.4g}, {logits.max().item():.4g}]")


if __name__ == "__main__":
    main()
