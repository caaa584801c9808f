#!/usr/bin/python3
"""The Fashion-MNIST demo's two models through the ONNX importer: the shipped weights
(examples/fashion_mnist/weights/, trained by tools/train_fashion_mnist.py) loaded into PyTorch,
exported to ONNX with a dynamic batch dim, and all 10000 test images classified by teeny-run from
that file. Checks, per model, that teeny's test accuracy is the one PyTorch computed with the same
weights (pytorch_accuracy.txt: the number the demo's safetensors path is held to) and that teeny's
logits match PyTorch's to 1e-4 of their largest magnitude.

    /usr/bin/python3 tools/onnx_fashion_mnist.py TEENY_RUN [OUT_DIR]

Debian's python3-torch and dataset-fashion-mnist; OUT_DIR (default: a temporary directory) keeps
the .onnx files, the inputs and teeny's outputs. Exit 1 if a model's accuracy or logits differ.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import LeNet, MLP  # noqa: E402
from train_fashion_mnist import load  # noqa: E402

WEIGHTS = os.path.join(os.path.dirname(HERE), "examples", "fashion_mnist", "weights")


def read_safetensors(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    state = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: tensor '{name}' is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        state[name] = torch.from_numpy(np.frombuffer(data[begin:end], np.float32).reshape(info["shape"]).copy())
    return state


def pytorch_accuracy():
    correct = {}
    with open(os.path.join(WEIGHTS, "pytorch_accuracy.txt")) as f:
        for line in f:
            name, _, count = line.split()
            correct[name] = int(count.split("/")[0])
    return correct


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    teeny_run = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="teeny-fashion-onnx.")
    os.makedirs(out, exist_ok=True)
    x, labels = load("t10k")
    np.save(os.path.join(out, "x.npy"), x.numpy())
    expected = pytorch_accuracy()
    failures = 0
    for name, cls in (("mlp", MLP), ("lenet", LeNet)):
        model = cls()
        model.load_state_dict(read_safetensors(os.path.join(WEIGHTS, f"{name}.safetensors")))
        model.eval()
        file = os.path.join(out, f"{name}.onnx")
        torch.onnx.export(model, x[:1], file, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=13)
        with torch.no_grad():
            want = model(x).numpy()
        saved = os.path.join(out, name)
        run = subprocess.run([teeny_run, file, "--input", f"x={os.path.join(out, 'x.npy')}", "--save-outputs", saved],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{name}: teeny-run failed ({run.returncode}): {run.stderr.strip() or run.stdout.strip()}")
            failures += 1
            continue
        got = np.load(os.path.join(saved, "y.npy"))
        correct = int((got.argmax(axis=1) == labels.numpy()).sum())
        torch_correct = int((want.argmax(axis=1) == labels.numpy()).sum())
        diff = float(np.abs(got - want).max()) / float(np.abs(want).max())
        ok = correct == expected[name] == torch_correct and diff <= 1e-4
        failures += not ok
        print(f"{name}: teeny from ONNX {correct / 100:.2f}% ({correct}/10000), PyTorch {torch_correct}/10000, "
              f"pytorch_accuracy.txt {expected[name]}/10000; logits max |teeny - PyTorch| / max |PyTorch| "
              f"{diff:.1e}: {'same' if ok else 'DIFFERENT'}")
    print(f"files in {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
