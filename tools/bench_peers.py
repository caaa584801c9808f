#!/usr/bin/python3
"""teeny's peers in bench/run.sh: exports the benchmark models to ONNX, times PyTorch, and prints the
table (and bench/onnx_vs_ort.sh's table).

Run with Debian's PyTorch (1.13): /usr/bin/python3, not the first python3 on PATH.

  bench_peers.py export DIR
      writes DIR/<model>_b<batch>.onnx for every benchmark config (torch.onnx.export, opset 13, fixed
      shapes; input 'x', output 'logits'), plus DIR/tiny_b1.onnx (one Linear(16, 16)): the cost of a
      call through a runtime's API, its floor. torch 1.13's exporter needs no `onnx` package.
  bench_peers.py time --model M --batch B --threads N [--seconds S]
      times PyTorch's forward (eval, torch.inference_mode(), torch.set_num_threads(N), OpenBLAS and
      OpenMP held to N threads too), after a warm-up, and prints one JSON line:
      {"runtime": "pytorch", "model", "batch", "threads", "p50_us", "min_us", "runs"}
  bench_peers.py train-time --model M --batch B --threads N [--seconds S]
      times one PyTorch training step (train mode, forward, F.cross_entropy, backward,
      torch.optim.AdamW(lr=1e-3) step, zero_grad; PyTorch's defaults otherwise) on U(0, 1) images
      and uniform labels, and prints one JSON line with "mode": "train" and each phase's median
      (forward_us, loss_us, backward_us, optimizer_us), as bench-train does for teeny.
  bench_peers.py train-table FILE.jsonl
      the medians over rounds of the training steps and the ratio teeny/PyTorch, with the training
      issue's target (teeny's step at most 0.5x PyTorch's).
  bench_peers.py train-epoch --model M [--threads N]
      the wall time of one training epoch of Fashion-MNIST's 60k images (Debian's
      dataset-fashion-mnist) at batch 64 with AdamW lr 1e-3, shuffled, as the demo trains (the
      test-set evaluation not counted), printed as one JSON line with "mode": "epoch".
  bench_peers.py gpu-time [--seconds S]
      (on a GPU machine, with its PyTorch) times the GPU benchmarks' models as bench-cuda times
      teeny's: the MLP at batch 64 and ResNet-18 (224 x 224) at batch 1 and 64, f32 (TF32 off for
      matmuls and cuDNN), per forward with the input copied from pageable host memory and the
      logits copied back, eagerly and replaying a CUDA graph (torch.cuda.graph); prints one JSON
      line per model, batch and mode: {"runtime": "pytorch-cuda", "model", "batch", "mode",
      "p50_ms", "images_per_s", "version", "gpu"}.
  bench_peers.py teeny-json FILE
      turns Google Benchmark's JSON (bench-models --benchmark_format=json) into the same lines, for
      "runtime": "teeny" (an "error" field instead of times for a skipped model).
  bench_peers.py teeny-run-json OUTPUT MODEL BATCH THREADS
      turns teeny-run's printed output (OUTPUT: a file holding it) into a line for "runtime":
      "teeny-onnx", with its import and load times (bench/onnx_vs_ort.sh).
  bench_peers.py onnx-table FILE.jsonl
      bench/onnx_vs_ort.sh's table: teeny and ORT on the same .onnx files.
  bench_peers.py table FILE.jsonl
      the medians over rounds of every (model, batch, threads, runtime) and the ratios
      teeny/ORT and teeny/PyTorch, with the targets of the CPU issue.

The models are tools/make_fixtures.py's MLP, LeNet and ResNet18 (torchvision's resnet18), random
weights (speed does not depend on their values), inputs U(0, 1).
"""
import json
import os
import re
import statistics
import sys
import time

MODELS = {"mlp": (1, 28), "lenet": (1, 28), "resnet18": (3, 224), "tiny": None}  # channels, image size
CONFIGS = [("mlp", 1), ("mlp", 64), ("lenet", 1), ("lenet", 64), ("resnet18", 1), ("resnet18", 8)]
# (model, batch, threads) -> teeny's latency must be at most this many times ONNX Runtime's (issue
# 13: ResNet-18 b1 <= 0.7x at 1 thread and 0.8x at 2, b8 >= 1.4x its images/s, LeNet b64 <= 0.5x;
# MLP b1's 0.7x is of ORT's in-process time, which the table does not show: see docs/benchmarks.md)
TARGETS = {("mlp", 64, 1): 1.0, ("mlp", 64, 2): 1.0, ("lenet", 64, 1): 0.5, ("lenet", 64, 2): 0.5,
           ("resnet18", 1, 1): 0.7, ("resnet18", 1, 2): 0.8, ("resnet18", 8, 1): 1 / 1.4,
           ("resnet18", 8, 2): 1 / 1.4}


def import_torch(threads=None):
    """torch with BLAS / OpenMP thread counts fixed before the libraries load (a fresh process each)."""
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(threads)
    saved = dict(os.environ)
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_fixtures  # sets OMP/OPENBLAS_NUM_THREADS=1 by default: put the environment back
    os.environ.clear()
    os.environ.update(saved)
    return torch, make_fixtures


def build_model(torch, fixtures, name):
    torch.manual_seed(0)
    if name == "tiny":
        return torch.nn.Linear(16, 16).eval()
    return {"mlp": fixtures.MLP, "lenet": fixtures.LeNet, "resnet18": fixtures.ResNet18}[name]().eval()


def example_input(torch, name, batch):
    if name == "tiny":
        return torch.rand(batch, 16)
    channels, size = MODELS[name]
    return torch.rand(batch, channels, size, size)


def export(out_dir):
    torch, fixtures = import_torch(1)
    os.makedirs(out_dir, exist_ok=True)
    for name, batch in CONFIGS + [("tiny", 1)]:
        model = build_model(torch, fixtures, name)
        path = os.path.join(out_dir, f"{name}_b{batch}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, example_input(torch, name, batch), path, opset_version=13,
                              input_names=["x"], output_names=["logits"], do_constant_folding=True)
        print(f"exported {path} ({os.path.getsize(path) / 1e6:.2f} MB)", file=sys.stderr)


def warm_then_time(run, seconds):
    """Calls run(False) for a warm-up (at least 5 calls, up to a quarter of `seconds`, 0.3 s at most),
    then run(True) for `seconds` and at least 20 calls: run times itself when told to record."""
    warm_until = time.perf_counter() + min(0.3, seconds / 4)
    for i in range(1000000):
        run(False)
        if i >= 4 and time.perf_counter() > warm_until:
            break
    stop_at = time.perf_counter() + seconds
    timed = 0
    while timed < 20 or time.perf_counter() < stop_at:
        run(True)
        timed += 1


def time_pytorch(name, batch, threads, seconds):
    torch, fixtures = import_torch(threads)
    torch.set_num_threads(threads)
    model = build_model(torch, fixtures, name)
    x = example_input(torch, name, batch)
    samples = []

    def forward(record):
        start = time.perf_counter_ns()
        model(x)
        if record:
            samples.append((time.perf_counter_ns() - start) / 1e3)

    with torch.inference_mode():
        warm_then_time(forward, seconds)
    print(json.dumps({"runtime": "pytorch", "model": name, "batch": batch, "threads": threads,
                      "p50_us": statistics.median(samples), "min_us": min(samples), "runs": len(samples),
                      "version": torch.__version__, "num_threads": torch.get_num_threads()}))


def time_pytorch_training(name, batch, threads, seconds):
    torch, fixtures = import_torch(threads)
    torch.set_num_threads(threads)
    model = build_model(torch, fixtures, name).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(42)
    x = example_input(torch, name, batch)
    labels = torch.randint(0, 10, (batch,), generator=generator)
    phases = {"step": [], "forward": [], "loss": [], "backward": [], "optimizer": []}

    def step(record):
        t0 = time.perf_counter_ns()
        logits = model(x)
        t1 = time.perf_counter_ns()
        loss = torch.nn.functional.cross_entropy(logits, labels)
        t2 = time.perf_counter_ns()
        loss.backward()
        t3 = time.perf_counter_ns()
        optimizer.step()
        optimizer.zero_grad()
        t4 = time.perf_counter_ns()
        if record:
            for key, a, b in (("step", t0, t4), ("forward", t0, t1), ("loss", t1, t2), ("backward", t2, t3),
                              ("optimizer", t3, t4)):
                phases[key].append((b - a) / 1e3)

    warm_then_time(step, seconds)
    line = {"runtime": "pytorch", "mode": "train", "model": name, "batch": batch, "threads": threads,
            "p50_us": statistics.median(phases["step"]), "min_us": min(phases["step"]), "runs": len(phases["step"]),
            "version": torch.__version__, "num_threads": torch.get_num_threads()}
    for key in ("forward", "loss", "backward", "optimizer"):
        line[key + "_us"] = statistics.median(phases[key])
    print(json.dumps(line))


def time_pytorch_epoch(name, threads):
    torch, fixtures = import_torch(threads)
    torch.set_num_threads(threads)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_fashion_mnist import load
    train_x, train_y = load("train")
    torch.manual_seed(0)
    model = build_model(torch, fixtures, name).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    perm = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(0))
    for i in range(0, len(perm), 64):
        idx = perm[i:i + 64]
        loss = torch.nn.functional.cross_entropy(model(train_x[idx]), train_y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(json.dumps({"runtime": "pytorch", "mode": "epoch", "model": name, "batch": 64, "threads": threads,
                      "seconds": time.perf_counter() - start, "version": torch.__version__}))


def train_table(path):
    runs = {}  # (model, batch, threads, runtime) -> [result line per round]
    with open(path) as f:
        for raw in f:
            raw = raw.strip()
            if raw.startswith("{"):
                r = json.loads(raw)
                if r.get("mode") == "train" and "error" not in r:
                    runs.setdefault((r["model"], r["batch"], r["threads"], r["runtime"]), []).append(r)
                elif "error" in r:
                    print(f"{r['runtime']} {r.get('model')}: {r['error']}")

    def med(key, field):
        values = [r[field] for r in runs.get(key, [])]
        return statistics.median(values) if values else None

    print("time per training step (forward + loss + backward + AdamW + zero_grad): the median over rounds of each "
          "run's median; phases: forward / backward / optimizer")
    header = ("model", "batch", "thr", "teeny", "PyTorch", "teeny/PyTorch", "teeny phases", "PyTorch phases",
              "target", "rounds")
    lines = [header]
    for model, batch, threads in sorted({k[:3] for k in runs}):
        t, p = (med((model, batch, threads, rt), "p50_us") for rt in ("teeny", "pytorch"))

        def phases(rt):
            values = [med((model, batch, threads, rt), f + "_us") for f in ("forward", "backward", "optimizer")]
            return "-" if None in values else " / ".join(fmt_us(v) for v in values)

        verdict = "-" if t is None or p is None else "<= 0.5x PyTorch: " + ("met" if t <= 0.5 * p else "MISSED")
        lines.append((model, str(batch), str(threads), fmt_us(t), fmt_us(p), f"{t / p:.2f}" if t and p else "-",
                      phases("teeny"), phases("pytorch"), verdict,
                      str(len(runs.get((model, batch, threads, "teeny"), [])))))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for i, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def teeny_json(path):
    with open(path) as f:
        report = json.load(f)
    for b in report.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        _, model, batch, threads = b["name"].split("/")[:4]
        line = {"runtime": "teeny", "model": model, "batch": int(batch.split(":")[1]),
                "threads": int(threads.split(":")[1])}
        if b.get("error_occurred"):
            line["error"] = b.get("error_message", "error")
        else:
            line.update({"p50_us": b["p50_us"], "min_us": b["min_us"], "runs": b["iterations"],
                         "max_err_vs_pytorch": b.get("max_err_vs_pytorch")})
        print(json.dumps(line))


def fmt_us(us):
    if us is None:
        return "-"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def table(path):
    runs = {}  # (model, batch, threads, runtime) -> [(p50_us, min_us) per round]
    errors = {}
    with open(path) as f:
        for raw in f:
            raw = raw.strip()
            if not raw.startswith("{"):
                continue
            r = json.loads(raw)
            key = (r["model"], r["batch"], r["threads"], r["runtime"])
            if "error" in r:
                errors[key] = r["error"]
            else:
                runs.setdefault(key, []).append((r["p50_us"], r["min_us"]))
    p50 = {k: statistics.median(x[0] for x in v) for k, v in runs.items()}
    best = {k: statistics.median(x[1] for x in v) for k, v in runs.items()}
    rows = sorted({k[:3] for k in list(runs) + list(errors)},
                  key=lambda k: (list(MODELS).index(k[0]), k[1], k[2]))
    print("latency per forward: the median over rounds of each run's median (in brackets: of each run's minimum)")
    header = ("model", "batch", "thr", "teeny", "ORT", "PyTorch", "teeny/ORT", "teeny/PyTorch", "target", "rounds")
    lines = [header]
    for model, batch, threads in rows:
        keys = [(model, batch, threads, rt) for rt in ("teeny", "ort", "pytorch")]
        t, o, p = (p50.get(k) for k in keys)
        bt, bo, bp = (best.get(k) for k in keys)
        target = TARGETS.get((model, batch, threads))
        verdict = "-"
        if target is not None and t is not None and o is not None:
            verdict = f"<= {target:.2g}x ORT: " + ("met" if t <= target * o else "MISSED")
        elif target is not None:
            verdict = f"<= {target:.2g}x ORT: not measured"

        def both(a, b):
            return "-" if a is None else f"{fmt_us(a)} ({fmt_us(b)})"

        def ratio(a, b, c, d):
            return f"{a / b:.2f} ({c / d:.2f})" if a and b else "-"

        n = len(runs.get(keys[0], []))
        lines.append((model, str(batch), str(threads), both(t, bt), both(o, bo), both(p, bp),
                      ratio(t, o, bt, bo), ratio(t, p, bt, bp), verdict, str(n)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for i, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for (model, batch, threads, runtime), error in sorted(errors.items()):
        print(f"{runtime} {model} batch {batch} threads {threads}: {error}")


def teeny_run_json(path, model, batch, threads):
    """One JSON line from teeny-run's output (its "time:" and "bench:" lines)."""
    def ms(text):
        value, unit = text.split()
        return float(value) / 1000 if unit == "us" else float(value)

    with open(path) as f:
        out = f.read()
    line = {"runtime": "teeny-onnx", "model": model, "batch": batch, "threads": threads}
    bench = re.search(r"^bench: (\d+) runs.*latency p50 ([\d.]+ [mu]s), p90 ([\d.]+ [mu]s).*min ([\d.]+ [mu]s)",
                      out, re.M)
    load = re.search(r"^time: import ([\d.]+ [mu]s), load ([\d.]+ [mu]s)", out, re.M)
    if not bench or not load:
        line["error"] = out.strip().splitlines()[-1] if out.strip() else "no output"
    else:
        line.update({"p50_us": ms(bench[2]) * 1000, "p90_us": ms(bench[3]) * 1000, "min_us": ms(bench[4]) * 1000,
                     "runs": int(bench[1]), "import_ms": ms(load[1]), "load_ms": ms(load[2])})
        line["create_ms"] = line["import_ms"] + line["load_ms"]
    print(json.dumps(line))


def onnx_table(path):
    """bench/onnx_vs_ort.sh's table: teeny and ORT on the same files, and teeny's hand-built graph."""
    runs = {}  # (model, batch, threads, runtime) -> [record per round]
    errors = {}
    with open(path) as f:
        for raw in f:
            if raw.startswith("{"):
                r = json.loads(raw)
                key = (r["model"], r["batch"], r["threads"], r["runtime"])
                if "error" in r:
                    errors[key] = r["error"]
                else:
                    runs.setdefault(key, []).append(r)

    def median(key, field):
        values = [r[field] for r in runs.get(key, []) if r.get(field) is not None]
        return statistics.median(values) if values else None

    def ratio(a, b):
        return f"{a / b:.2f}" if a is not None and b else "-"

    def fmt_ms(ms):
        return "-" if ms is None else f"{ms:.0f} ms"

    rows = sorted({k[:3] for k in list(runs) + list(errors)})
    print("latency per forward, the median over rounds of each run's median; teeny-run reads the file, "
          "ORT the same file; 'by hand': the same network built with the GraphBuilder (bench-models)")
    header = ("model", "batch", "thr", "teeny (onnx)", "ORT", "teeny/ORT", "by hand", "onnx/by hand",
              "teeny import+load", "ORT session", "load ratio", "rounds")
    lines = [header]
    for model, batch, threads in rows:
        t, o, h = ((model, batch, threads, rt) for rt in ("teeny-onnx", "ort", "teeny"))
        tp, op, hp = median(t, "p50_us"), median(o, "p50_us"), median(h, "p50_us")
        tc, oc = median(t, "create_ms"), median(o, "create_ms")
        lines.append((model, str(batch), str(threads), fmt_us(tp), fmt_us(op), ratio(tp, op), fmt_us(hp),
                      ratio(tp, hp), fmt_ms(tc), fmt_ms(oc), ratio(tc, oc), str(len(runs.get(t, [])))))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)))
    for key, error in sorted(errors.items()):
        print(f"{key[3]} {key[0]} b{key[1]} t{key[2]}: {error}")


def time_pytorch_gpu(seconds):
    torch, fixtures = import_torch()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    for name, batch in [("mlp", 64), ("resnet18", 1), ("resnet18", 64)]:
        model = build_model(torch, fixtures, name).to(device)
        host = example_input(torch, name, batch)
        static_x = host.to(device)
        with torch.inference_mode():
            # The graph records the forward on static buffers; a replay reads static_x's new values.
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    model(static_x)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_y = model(static_x)
            for mode in ("eager", "replay"):
                samples = []

                def forward(record):
                    start = time.perf_counter_ns()
                    if mode == "eager":
                        model(host.to(device)).cpu()
                    else:
                        static_x.copy_(host)
                        graph.replay()
                        static_y.cpu()
                    if record:
                        samples.append((time.perf_counter_ns() - start) / 1e6)

                warm_then_time(forward, seconds)
                p50 = statistics.median(samples)
                print(json.dumps({"runtime": "pytorch-cuda", "model": name, "batch": batch, "mode": mode,
                                  "p50_ms": p50, "images_per_s": batch / (p50 / 1e3), "version": torch.__version__,
                                  "gpu": torch.cuda.get_device_name(0)}), flush=True)


def main(argv):
    if len(argv) >= 2 and argv[0] == "export":
        return export(argv[1])
    if len(argv) >= 2 and argv[0] == "teeny-json":
        return teeny_json(argv[1])
    if len(argv) >= 2 and argv[0] == "table":
        return table(argv[1])
    if len(argv) >= 5 and argv[0] == "teeny-run-json":
        return teeny_run_json(argv[1], argv[2], int(argv[3]), int(argv[4]))
    if len(argv) >= 2 and argv[0] == "onnx-table":
        return onnx_table(argv[1])
    if len(argv) >= 2 and argv[0] == "train-table":
        return train_table(argv[1])
    if argv and argv[0] == "train-epoch":
        opts = dict(zip(argv[1::2], argv[2::2]))
        return time_pytorch_epoch(opts["--model"], int(opts.get("--threads", "1")))
    if argv and argv[0] == "train-time":
        opts = dict(zip(argv[1::2], argv[2::2]))
        return time_pytorch_training(opts["--model"], int(opts["--batch"]), int(opts["--threads"]),
                                     float(opts.get("--seconds", "2")))
    if argv and argv[0] == "gpu-time":
        opts = dict(zip(argv[1::2], argv[2::2]))
        return time_pytorch_gpu(float(opts.get("--seconds", "1")))
    if argv and argv[0] == "time":
        opts = dict(zip(argv[1::2], argv[2::2]))
        return time_pytorch(opts["--model"], int(opts["--batch"]), int(opts["--threads"]),
                            float(opts.get("--seconds", "2")))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
