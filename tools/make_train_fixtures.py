#!/usr/bin/python3
"""Writes the PyTorch reference fixtures of teeny.train (deterministic: running it twice gives identical bytes).

PyTorch (1.13 on Debian 12: run with /usr/bin/python3) is the independent reference. Inputs are drawn in
float32 and widened to float64, every expected value is computed by PyTorch in float64, so one fixture
serves teeny's float tests (compared loosely) and its double tests (compared to ~1e-12).

  tests/fixtures/train/losses.safetensors     per case <c>: <c>.input, <c>.target (and <c>.pos_weight),
                                              <c>.loss (0-d) and <c>.grad (d loss / d input)
  tests/fixtures/train/optimizers.safetensors per case <c>: <c>.grad.<step>.<i> (the gradient given at
                                              each step), <c>.param.<step>.<i> (the parameter after step;
                                              step 0 = initial), <c>.state.<i>.<name> after the last step.
                                              Three parameters, i as PyTorch numbers them: group 0 holds
                                              p0 [3, 4] and p1 [4], group 1 holds p2 [2, 3].
  tests/fixtures/train/schedules.safetensors  per case <c>: <c>.lr.<g>, the lr of group g (base lrs 0.1 and
                                              0.02) after 0, 1, 2, ... scheduler.step() calls
  tests/fixtures/train/clip.safetensors       <c>.grad.<i> before, <c>.clipped.<i> after, <c>.total_norm

The options of every case are in its name and in CASES below; tests/train/*.cpp repeats them.

Usage: /usr/bin/python3 tools/make_train_fixtures.py [repository root]   (default: the parent of tools/)
"""
import math
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import seed_of, write_safetensors  # noqa: E402

D = torch.float64


def randn(name, *shape, s=1.0):
    g = torch.Generator().manual_seed(seed_of(name))
    return (torch.randn(*shape, generator=g, dtype=torch.float32) * s).to(D)


def randint(name, lo, hi, *shape):
    g = torch.Generator().manual_seed(seed_of(name))
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64)


# ---- losses -----------------------------------------------------------------------------------------


def loss_fixtures():
    out = {}

    def case(name, fn, x, target, extra=None):
        x = x.clone().requires_grad_(True)
        loss = fn(x, target) if extra is None else fn(x, target, extra)
        loss.backward()
        out[name + ".input"] = x.detach()
        out[name + ".target"] = target
        out[name + ".loss"] = loss.detach().reshape(())
        out[name + ".grad"] = x.grad.detach()
        if extra is not None:
            out[name + ".pos_weight"] = extra

    logits = randn("ce.logits", 6, 5, s=3.0)
    targets = torch.tensor([1, 4, 0, 2, 2, 3])
    ignored = torch.tensor([1, -100, 0, 2, -100, 3])
    with_two = torch.tensor([2, 4, 0, 2, 1, 3])  # ignore_index=2 drops samples 0 and 3
    case("ce_mean", lambda x, t: F.cross_entropy(x, t), logits, targets)
    case("ce_sum", lambda x, t: F.cross_entropy(x, t, reduction="sum"), logits, targets)
    case("ce_ignore", lambda x, t: F.cross_entropy(x, t), logits, ignored)
    case("ce_ignore_sum", lambda x, t: F.cross_entropy(x, t, reduction="sum"), logits, ignored)
    case("ce_ignore2", lambda x, t: F.cross_entropy(x, t, ignore_index=2), logits, with_two)
    case("ce_smooth", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), logits, targets)
    case("ce_smooth_ignore", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2), logits, ignored)
    case("ce_smooth_ignore_sum", lambda x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.2), logits,
         ignored)
    case("ce_large", lambda x, t: F.cross_entropy(x, t), randn("ce.large", 4, 3, s=300.0), torch.tensor([0, 1, 2, 1]))

    log_probs = randn("nll.x", 5, 4).log_softmax(1)
    case("nll_mean", lambda x, t: F.nll_loss(x, t), log_probs, torch.tensor([0, 3, 1, 1, 2]))
    case("nll_sum", lambda x, t: F.nll_loss(x, t, reduction="sum"), log_probs, torch.tensor([0, 3, 1, 1, 2]))
    case("nll_ignore", lambda x, t: F.nll_loss(x, t), log_probs, torch.tensor([0, -100, 1, -100, 2]))

    x = randn("reg.x", 3, 4, 2)
    y = randn("reg.y", 3, 4, 2)
    y[0, 0, 0] = x[0, 0, 0]  # a zero difference: sign(0) = 0 in l1's gradient
    y[1, 2, 1] = x[1, 2, 1] + 0.5  # exactly beta / delta away
    for red in ("mean", "sum"):
        case("mse_" + red, lambda a, b: F.mse_loss(a, b, reduction=red), x, y)
        case("l1_" + red, lambda a, b: F.l1_loss(a, b, reduction=red), x, y)
        case("smooth_l1_" + red, lambda a, b: F.smooth_l1_loss(a, b, reduction=red), x, y)
        case("huber_" + red, lambda a, b: F.huber_loss(a, b, reduction=red), x, y)
    case("smooth_l1_beta0_5", lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), x, y)
    case("smooth_l1_beta0", lambda a, b: F.smooth_l1_loss(a, b, beta=0.0), x, y)
    case("huber_delta0_5", lambda a, b: F.huber_loss(a, b, delta=0.5), x, y)
    case("huber_delta2", lambda a, b: F.huber_loss(a, b, delta=2.0), x, y)

    z = randn("bce.x", 4, 3, s=4.0)
    p = torch.rand(4, 3, generator=torch.Generator().manual_seed(seed_of("bce.p")), dtype=torch.float32).to(D)
    p[0, 0] = 0.0
    p[0, 1] = 1.0
    case("bce_mean", lambda a, b: F.binary_cross_entropy_with_logits(a, b), z, p)
    case("bce_sum", lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="sum"), z, p)
    case("bce_pos_weight", lambda a, b, w: F.binary_cross_entropy_with_logits(a, b, pos_weight=w), z, p,
         torch.tensor([0.5, 2.0, 3.0], dtype=D))
    case("bce_pos_weight_full", lambda a, b, w: F.binary_cross_entropy_with_logits(a, b, pos_weight=w), z, p,
         torch.rand(4, 3, generator=torch.Generator().manual_seed(seed_of("bce.w")), dtype=torch.float32).to(D) * 3)
    return out


# ---- optimizers -------------------------------------------------------------------------------------

STEPS = 5
SHAPES = [(3, 4), (4,), (2, 3)]

# name: (class, group 0 options, group 1 options)
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.1), dict(lr=0.05)),
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.1, momentum=0.9), dict(lr=0.05, momentum=0.5)),
    "sgd_dampening": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.5), dict(lr=0.05, momentum=0.9)),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True), dict(lr=0.05)),
    "sgd_weight_decay": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01), dict(lr=0.05, weight_decay=0.1)),
    "adam": (torch.optim.Adam, dict(lr=1e-3), dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6)),
    "adam_weight_decay": (torch.optim.Adam, dict(lr=1e-2, weight_decay=0.1), dict(lr=1e-2)),
    "adam_amsgrad": (torch.optim.Adam, dict(lr=1e-2, amsgrad=True), dict(lr=1e-3, amsgrad=True, weight_decay=0.01)),
    "adamw": (torch.optim.AdamW, dict(lr=1e-2), dict(lr=1e-3, weight_decay=0.0)),
    "adamw_amsgrad": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1, amsgrad=True), dict(lr=1e-2)),
}


def optimizer_fixtures():
    out = {}
    for name, (cls, o0, o1) in OPTIMIZERS.items():
        params = [randn(f"{name}.p{i}", *s).requires_grad_(True) for i, s in enumerate(SHAPES)]
        opt = cls([dict(params=params[:2], **o0), dict(params=params[2:], **o1)])
        for i, p in enumerate(params):
            out[f"{name}.param.0.{i}"] = p.detach().clone()
        for step in range(1, STEPS + 1):
            for i, p in enumerate(params):
                g = randn(f"{name}.g{step}.{i}", *p.shape)
                if step == 3 and i == 1:
                    g[0] = 0.0
                p.grad = g
                out[f"{name}.grad.{step}.{i}"] = g.clone()
            opt.step()
            for i, p in enumerate(params):
                out[f"{name}.param.{step}.{i}"] = p.detach().clone()
        for i, p in enumerate(params):
            for key, value in opt.state[p].items():
                if value is None:  # SGD without momentum keeps momentum_buffer = None
                    continue
                if key == "step":
                    value = torch.tensor(int(value.item()), dtype=torch.int64)
                out[f"{name}.state.{i}.{key}"] = value.detach().clone()
    return out


# ---- schedules --------------------------------------------------------------------------------------

N_STEPS = 30


def schedule_fixtures():
    out = {}
    S = torch.optim.lr_scheduler
    cases = {
        "step": lambda o: S.StepLR(o, step_size=3, gamma=0.5),
        "step_default_gamma": lambda o: S.StepLR(o, step_size=4),
        "cosine": lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
        "cosine_zero_min": lambda o: S.CosineAnnealingLR(o, T_max=7),
        "linear": lambda o: S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=4),
        "linear_default": lambda o: S.LinearLR(o),
        "linear_decay": lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.25, total_iters=6),
        "warmup_cosine": lambda o: S.SequentialLR(
            o, [S.LinearLR(o, start_factor=0.01, total_iters=5), S.CosineAnnealingLR(o, T_max=20, eta_min=1e-4)],
            milestones=[5]),
        "warmup_step_cosine": lambda o: S.SequentialLR(
            o, [S.LinearLR(o, start_factor=0.5, total_iters=3), S.StepLR(o, step_size=2, gamma=0.9),
                S.CosineAnnealingLR(o, T_max=8)], milestones=[3, 10]),
    }
    for name, make in cases.items():
        p = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
        opt = torch.optim.SGD([dict(params=[p[0]], lr=0.1), dict(params=[p[1]], lr=0.02)])
        sched = make(opt)
        lrs = [[], []]
        for _ in range(N_STEPS):
            for g, group in enumerate(opt.param_groups):
                lrs[g].append(group["lr"])
            opt.step()
            sched.step()
        for g in range(2):
            out[f"{name}.lr.{g}"] = torch.tensor(lrs[g], dtype=D)
    return out


# ---- clip_grad_norm_ --------------------------------------------------------------------------------

CLIPS = {"clip_l2": (1.0, 2.0), "clip_l2_no_clip": (100.0, 2.0), "clip_inf": (0.5, math.inf),
         "clip_l1_5": (2.0, 1.5), "clip_l1": (3.0, 1.0)}


def clip_fixtures():
    out = {}
    for name, (max_norm, norm_type) in CLIPS.items():
        params = [torch.zeros(*s, dtype=D, requires_grad=True) for s in SHAPES]
        for i, p in enumerate(params):
            p.grad = randn(f"{name}.g{i}", *p.shape)
            out[f"{name}.grad.{i}"] = p.grad.clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
        out[f"{name}.total_norm"] = total.detach().reshape(())
        for i, p in enumerate(params):
            out[f"{name}.clipped.{i}"] = p.grad.clone()
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    torch.use_deterministic_algorithms(True)
    where = os.path.join(root, "tests", "fixtures", "train")
    meta = {"source": "tools/make_train_fixtures.py", "torch": torch.__version__.split("+")[0]}
    write_safetensors(os.path.join(where, "losses.safetensors"), loss_fixtures(), meta)
    write_safetensors(os.path.join(where, "optimizers.safetensors"), optimizer_fixtures(), meta)
    write_safetensors(os.path.join(where, "schedules.safetensors"), schedule_fixtures(), meta)
    write_safetensors(os.path.join(where, "clip.safetensors"), clip_fixtures(), meta)


if __name__ == "__main__":
    main()
