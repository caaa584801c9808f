#!/usr/bin/python3
"""Writes the binary fixtures of teeny.io's tests into tests/fixtures/io/ (deterministic).

Plain Python (struct + json), no torch or safetensors package needed, so that the files are an
independent reference for teeny's reader and writer:

  reference.safetensors  a hand-laid-out file with known values in F32, F16, BF16, F64, I64 and
                         BOOL, a "__metadata__" block in the middle of the header, an F32 tensor at
                         an unaligned offset, a gap between tensors and an empty tensor.
  canonical.safetensors  the layout the safetensors library's writer produces for a small dict of
                         tensors; teeny's save_safetensors must reproduce it byte for byte.
  npy/*.npy              arrays of known values written by NumPy's own np.save (the format's
                         reference writer; Debian's python3-numpy): dtypes, both byte orders,
                         Fortran order, a 0-d and an empty array, and format version 2.0.

Usage: /usr/bin/python3 tools/make_io_fixtures.py [output dir]   (default: tests/fixtures/io next to this script)
"""
import json
import os
import struct
import sys


def bf16_bits(x):
    """bfloat16 bits of x; the test values are exact in bfloat16, so truncation is exact."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    assert bits & 0xFFFF == 0, f"{x} is not exact in bfloat16"
    return bits >> 16


def header_bytes(header):
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)  # the data buffer starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text


def reference():
    # name -> (dtype, shape, packed little-endian bytes); laid out at hand-picked offsets.
    tensors = [
        ("mask", "BOOL", [3], bytes([1, 0, 1])),
        ("fc1.weight", "F32", [2, 3], struct.pack("<6f", 0.5, -1.25, 3.0, 0.001, -0.0, 65504.0)),
        ("fc1.bias", "F16", [3], struct.pack("<3e", 1.0, -2.5, 0.099975586)),
        ("scale", "F64", [2], struct.pack("<2d", 0.1, -2.0)),
        ("bn1.num_batches_tracked", "I64", [], struct.pack("<q", 1234567890123)),
        ("emb", "BF16", [2, 2], struct.pack("<4H", *(bf16_bits(v) for v in (1.0, -0.5, 3.140625, 256.0)))),
        ("out.weight", "F32", [1, 2], struct.pack("<2f", 2.0, -4.0)),
        ("empty", "F32", [0, 4], b""),
    ]
    # offsets: mask [0,3); fc1.weight [3,27) is unaligned; fc1.bias [27,33); gap [33,40);
    # then 8-aligned: scale [40,56), bn1... [56,64), emb [64,72), out.weight [72,80), empty [80,80)
    starts = {"mask": 0, "fc1.weight": 3, "fc1.bias": 27, "scale": 40, "bn1.num_batches_tracked": 56,
              "emb": 64, "out.weight": 72, "empty": 80}
    data = bytearray(80)
    for i in range(33, 40):
        data[i] = 0xEE  # the gap holds junk that no tensor may read
    header = {}
    for i, (name, dtype, shape, raw) in enumerate(tensors):
        begin = starts[name]
        data[begin:begin + len(raw)] = raw
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, begin + len(raw)]}
        if i == 3:  # metadata need not come first
            header["__metadata__"] = {"format": "pt", "source": "make_io_fixtures.py"}
    return header_bytes(header) + bytes(data)


# The safetensors library's dtype order (its Rust enum); its writer sorts by it, widest first, then by name.
WRITER_ORDER = ["BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]


def canonical():
    tensors = {
        "b": ("F32", [2], struct.pack("<2f", 1.0, 2.0)),
        "a": ("F16", [3], struct.pack("<3e", 0.5, -1.0, 2.0)),
        "c": ("I64", [1], struct.pack("<q", -7)),
        "d": ("U8", [3], bytes([1, 2, 3])),
        "e": ("F32", [2, 1], struct.pack("<2f", -3.0, 4.5)),
    }
    order = sorted(tensors, key=lambda n: (-WRITER_ORDER.index(tensors[n][0]), n))
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in order:
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    return header_bytes(header) + b"".join(tensors[n][2] for n in order)


def npy_files(out):
    """NumPy writes these; tests/io/test_npy.cpp knows their values, and save_npy must reproduce
    the C-order, little-endian ones byte for byte."""
    import numpy as np  # only for these files

    os.makedirs(out, exist_ok=True)
    arrays = {
        "f32_2x3": np.array([[0.5, -1.25, 3.0], [0.001, -0.0, 65504.0]], dtype="<f4"),
        "f64_fortran_2x3": np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3)),
        "i16_fortran_2x3x4": np.asfortranarray(np.arange(24, dtype="<i2").reshape(2, 3, 4)),
        "i32_big_endian": np.array([1, -2, 70000], dtype=">i4"),
        "i64_scalar": np.array(-7, dtype="<i8"),
        "bool_4": np.array([True, False, False, True]),
        "f16_3": np.array([1.0, -2.5, 0.099975586], dtype="<f2"),
        "u8_empty_0x3": np.zeros((0, 3), dtype="u1"),
        "c64_2": np.array([1 + 2j, 3], dtype="<c8"),
    }
    for name, array in arrays.items():
        np.save(os.path.join(out, name + ".npy"), array)
    with open(os.path.join(out, "f32_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, np.array([1.5, -2.0], dtype="<f4"), version=(2, 0))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "io")
    os.makedirs(out, exist_ok=True)
    for name, content in (("reference.safetensors", reference()), ("canonical.safetensors", canonical())):
        with open(os.path.join(out, name), "wb") as f:
            f.write(content)
    npy_files(os.path.join(out, "npy"))


if __name__ == "__main__":
    main()
