#!/usr/bin/python3
"""Checks weights written by teeny with PyTorch: loads a safetensors state_dict into tools/make_fixtures.py's
MLP or LeNet (strict: every key, shape and no extra), classifies the 10,000 Fashion-MNIST test images in
eval mode and prints the accuracy.

Usage: /usr/bin/python3 tools/check_teeny_weights.py --model mlp|lenet FILE.safetensors [--data DIR]
Prints "pytorch test accuracy: NN.NN% (correct/10000)". Exit status 0, or 1 with a message on stderr.
"""
import argparse
import json
import os
import struct
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_fashion_mnist  # noqa: E402
from make_fixtures import LeNet, MLP  # noqa: E402

NP_DTYPES = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64,
             "F16": np.float16, "F32": np.float32, "F64": np.float64}


def read_safetensors(path):
    """{name: tensor} and the metadata of a safetensors file (BF16 widened to float32)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"header length {n} runs past the end of the file ({len(data)} bytes)")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {}) or {}
    body = memoryview(data)[8 + n:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        shape = list(entry["shape"])
        if not 0 <= begin <= end <= len(body):
            raise ValueError(f"{name}: data_offsets [{begin}, {end}] outside the {len(body)}-byte data")
        raw = body[begin:end]
        if entry["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif entry["dtype"] in NP_DTYPES:
            a = np.frombuffer(raw, dtype=np.dtype(NP_DTYPES[entry["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"{name}: unsupported dtype {entry['dtype']}")
        if a.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{name}: {a.size} elements for shape {shape}")
        tensors[name] = torch.from_numpy(a.astype(a.dtype.newbyteorder("="), copy=True).reshape(shape))
    return tensors, metadata


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "lenet"], required=True)
    parser.add_argument("--data", default=train_fashion_mnist.DATA, help="Fashion-MNIST IDX directory")
    parser.add_argument("file", help="a state_dict saved as safetensors (written by teeny)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    try:
        state, _ = read_safetensors(args.file)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"{args.file}: cannot read safetensors: {e}", file=sys.stderr)
        return 1
    model = {"mlp": MLP, "lenet": LeNet}[args.model]()
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        print(f"{args.file}: does not load into {args.model}: {e}", file=sys.stderr)
        return 1
    train_fashion_mnist.DATA = args.data
    test_x, test_y = train_fashion_mnist.load("t10k")
    correct = train_fashion_mnist.evaluate(model, test_x, test_y)
    print(f"pytorch test accuracy: {100.0 * correct / len(test_y):.2f}% ({correct}/{len(test_y)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
