#!/usr/bin/python3
"""Writes the small ONNX models tests/onnx/test_import.cpp reads (tests/fixtures/onnx/), built with
ONNX's own helpers (python3-onnx), and their expected outputs computed by NumPy: an independent
reference for the importer. Deterministic: run it again and nothing changes.

    /usr/bin/python3 tools/make_onnx_fixtures.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "onnx")


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name))


def save_tensor(array, name):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(numpy_helper.from_array(array).SerializeToString())


def model_of(nodes, inputs, outputs, initializers=(), opset=13, domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets, producer_name="make_onnx_fixtures")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)

    # An MLP over a dynamic batch: Gemm (B transposed, C), Relu, MatMul by a constant, Softmax.
    w1 = rng.standard_normal((6, 4)).astype(np.float32)  # [out, in]: transB = 1
    b1 = rng.standard_normal(6).astype(np.float32)
    w2 = rng.standard_normal((6, 3)).astype(np.float32)  # [in, out]: MatMul
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["a"], name="act"),
        helper.make_node("MatMul", ["a", "w2"], ["z"], name="fc2"),
        helper.make_node("Softmax", ["z"], ["y"], name="probs", axis=-1),
    ]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")]
    x_in = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y_out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    save(model_of(nodes, [x_in], [y_out], inits), "mlp.onnx")
    for batch in (1, 8):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        z = np.maximum(x.astype(np.float64) @ w1.T + b1, 0) @ w2
        y = np.exp(z - z.max(axis=1, keepdims=True))
        y /= y.sum(axis=1, keepdims=True)
        save_tensor(x, f"mlp_x_{batch}.pb")
        save_tensor(y.astype(np.float32), f"mlp_y_{batch}.pb")
    # The batch of 8 as NumPy files too, for teeny-run (tests/tools/run.sh); and an expected
    # output off by 0.01 in one element, which teeny-run --expect must report.
    np.save(os.path.join(OUT, "mlp_x_8.npy"), x)
    np.save(os.path.join(OUT, "mlp_y_8.npy"), y.astype(np.float32))
    off = y.astype(np.float32)
    off[5, 2] += 0.01
    np.save(os.path.join(OUT, "mlp_y_8_off.npy"), off)

    # The same first layer with its weight in an external data file beside the model.
    ext = model_of(nodes[:2], [x_in], [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 6])],
                   inits[:2])
    if os.path.exists(os.path.join(OUT, "mlp_weights.bin")):  # onnx.save appends to it
        os.remove(os.path.join(OUT, "mlp_weights.bin"))
    onnx.external_data_helper.convert_model_to_external_data(
        ext, all_tensors_to_one_file=True, location="mlp_weights.bin", size_threshold=0)
    onnx.save(ext, os.path.join(OUT, "external.onnx"))
    # ... and one whose location leaves the model's folder.
    escape = onnx.load(os.path.join(OUT, "external.onnx"), load_external_data=False)
    for t in escape.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = "../mlp_weights.bin"
    onnx.save(escape, os.path.join(OUT, "external_escape.onnx"))

    # Two ops teeny does not import, and a custom-domain op that a user's converter maps.
    nodes = [
        helper.make_node("Unique", ["x"], ["e"], name="unique"),
        helper.make_node("Relu", ["e"], ["r"], name="after_unique"),  # its input's node is reported once
        helper.make_node("Det", ["x"], ["d"], name="det"),
        helper.make_node("Twice", ["x"], ["t"], name="twice", domain="com.example"),
    ]
    square = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("r", [None]), ("d", []), ("t", [3, 3]))]
    save(model_of(nodes, [square], outs, domains=["com.example"]), "unsupported.onnx")
    twice = model_of([nodes[3]], [square], [outs[2]], domains=["com.example"])
    save(twice, "custom_domain.onnx")

    # A node reading a value nothing defines (onnx.checker would refuse it: saved unchecked).
    bad = model_of([helper.make_node("Relu", ["nowhere"], ["y"], name="lost")], [square],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])])
    onnx.save(bad, os.path.join(OUT, "undefined_input.onnx"))

    # Arithmetic with constant operands on either side, broadcast: y = ((1 - x) * h + b) ^ 2 / 3.
    rng = np.random.default_rng(11)
    half = rng.standard_normal(4).astype(np.float32)
    bias = rng.standard_normal((3, 1)).astype(np.float32)
    consts = [numpy_helper.from_array(np.array(1, np.float32), "one"), numpy_helper.from_array(half, "h"),
              numpy_helper.from_array(bias, "b"), numpy_helper.from_array(np.array([2], np.float32), "two"),
              numpy_helper.from_array(np.array(3, np.float32), "three")]
    nodes = [
        helper.make_node("Sub", ["one", "x"], ["s"], name="one_minus"),
        helper.make_node("Mul", ["s", "h"], ["m"], name="scale"),
        helper.make_node("Add", ["m", "b"], ["a"], name="shift"),
        helper.make_node("Pow", ["a", "two"], ["p"], name="square"),
        helper.make_node("Div", ["p", "three"], ["y"], name="third"),
    ]
    x_in = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])
    y_out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 4])
    save(model_of(nodes, [x_in], [y_out], consts), "constants.onnx")
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = ((1 - x.astype(np.float64)) * half + bias) ** 2 / 3
    save_tensor(x, "constants_x.pb")
    save_tensor(y.astype(np.float32), "constants_y.pb")

    # Shape arithmetic as PyTorch exports x.reshape(x.size(0), x.size(1) * x.size(2)), and float
    # arithmetic on constants only: all folded at import. y = x.reshape(2, 12) * sqrt(4) - (-1).
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    f32 = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i0"], ["d0"], name="d0", axis=0),
        helper.make_node("Gather", ["s", "i1"], ["d1"], name="d1", axis=0),
        helper.make_node("Gather", ["s", "i2"], ["d2"], name="d2", axis=0),
        helper.make_node("Mul", ["d1", "d2"], ["d12"], name="d12"),
        helper.make_node("Unsqueeze", ["d0", "axes"], ["u0"], name="u0"),
        helper.make_node("Unsqueeze", ["d12", "axes"], ["u12"], name="u12"),
        helper.make_node("Concat", ["u0", "u12"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
        helper.make_node("Sqrt", ["four"], ["two"], name="sqrt_four"),
        helper.make_node("Neg", ["one"], ["minus_one"], name="neg_one"),
        helper.make_node("Mul", ["r", "two"], ["m"], name="double"),
        helper.make_node("Sub", ["m", "minus_one"], ["y"], name="plus_one"),
    ]
    inits = [i64("i0", 0), i64("i1", 1), i64("i2", 2), i64("axes", [0]), f32("four", 4), f32("one", 1)]
    x_in = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y_out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])
    save(model_of(nodes, [x_in], [y_out], inits), "folding.onnx")
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    save_tensor(x, "folding_x.pb")
    save_tensor((x.reshape(2, 12).astype(np.float64) * 2 + 1).astype(np.float32), "folding_y.pb")
    # Integer shape arithmetic that divides by zero: an error naming the node, not a wrong shape.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Div", ["s", "zero"], ["q"], name="div_by_zero"),
        helper.make_node("Reshape", ["x", "q"], ["y"], name="reshape"),
    ]
    y_out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c"])
    save(model_of(nodes, [x_in], [y_out], [i64("zero", [0, 1, 1])]), "fold_div_zero.onnx")
    # Tile whose repeats each fit the importer's element limit but whose product does not.
    nodes = [helper.make_node("Tile", ["x", "repeats"], ["y"], name="tile")]
    y_out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2 << 20, 3 << 20, 4])
    save(model_of(nodes, [x_in], [y_out], [i64("repeats", [1 << 20, 1 << 20, 1])]), "tile_too_large.onnx")

    torch_export()
    conv_transpose_export()
    resize_export()
    silu_export()
    class_token_export()


def export_with_outputs(model, inputs, output_names, name):
    """Exports `model` (eval mode, opset 13, fixed shapes) to OUT/<name>.onnx with `inputs` (name ->
    tensor), and saves each input and each output PyTorch computes as OUT/<name>_<value>.npy."""
    import torch

    model = model.eval()
    torch.onnx.export(model, tuple(inputs.values()), os.path.join(OUT, f"{name}.onnx"), input_names=list(inputs),
                      output_names=output_names, opset_version=13)
    with torch.no_grad():
        outputs = model(*inputs.values())
    for value, t in (*inputs.items(), *zip(output_names, outputs)):
        np.save(os.path.join(OUT, f"{name}_{value}.npy"), t.numpy())


def conv_transpose_export():
    """ConvTranspose where ONNX's test data does not reach, exported by PyTorch with its outputs at
    batch 2: by phases with groups, a bias and output_padding (y); by stuffing, a stride over the
    window with output_padding and no bias (z); 1-d with a stride (w)."""
    import torch

    torch.manual_seed(6)

    class Up(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.phased = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
            self.stuffed = torch.nn.ConvTranspose2d(4, 3, (2, 3), stride=(3, 2), padding=(1, 0), output_padding=(2, 1),
                                                    bias=False)
            self.line = torch.nn.ConvTranspose1d(4, 2, 4, stride=2, padding=1)

        def forward(self, x, s):
            return self.phased(x), self.stuffed(x), self.line(s)

    export_with_outputs(Up(), {"x": torch.randn(2, 4, 5, 6), "s": torch.randn(2, 4, 7)}, ["y", "z", "w"],
                        "conv_transpose")


def resize_export():
    """F.interpolate as PyTorch exports it to Resize, with its outputs at batch 2: bilinear by a
    scale factor (y, half_pixel), with align_corners to a size (z), and nearest by 2 (w)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(7)

    class Resize(torch.nn.Module):
        def forward(self, x):
            return (F.interpolate(x, scale_factor=(2.5, 1.5), mode="bilinear", align_corners=False,
                                  recompute_scale_factor=False),
                    F.interpolate(x, size=(4, 9), mode="bilinear", align_corners=True),
                    F.interpolate(x, scale_factor=2, mode="nearest"))

    export_with_outputs(Resize(), {"x": torch.randn(2, 3, 5, 6)}, ["y", "z", "w"], "resize")


def silu_export():
    """F.silu, which PyTorch exports as x * sigmoid(x): fused to one SiLU at import (after the
    convolution, y), and not fused where the sigmoid is read again (z = h * sigmoid(h), with the
    sigmoid an output too, s). Outputs as PyTorch computes them, at batch 2."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(8)

    class Swish(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            h = F.silu(self.conv(x))
            s = torch.sigmoid(h)
            return h, h * s, s

    export_with_outputs(Swish(), {"x": torch.randn(2, 3, 5, 5)}, ["y", "z", "s"], "silu")


def torch_export():
    """A model with a transformer's shape handling in miniature, exported by PyTorch with a
    dynamic batch: x.size(0) and x.view(n, -1) (shape computations on a symbolic dim), an expand
    to a computed shape (with Where(Equal(...)) for its -1), cat, x[:, :1] and x[:, 0] (Slice, and
    Gather at a constant index). Expected outputs are PyTorch's, at batch 2 and 5."""
    import torch  # python3-torch, only for these files

    torch.manual_seed(5)

    class Tokens(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 8)
            self.cls = torch.nn.Parameter(torch.randn(1, 1, 8))
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x):  # x: [batch, 6, 4]
            n = x.shape[0]
            t = self.proj(x) + self.cls  # [n, 6, 8]
            g = t.mean(dim=1, keepdim=True).expand(n, t.size(1), -1)
            t = torch.cat([t[:, :1], t + g], dim=1)  # [n, 7, 8]
            flat = t.view(t.size(0), -1)  # [n, 56]
            t = flat.view(n, t.size(1), -1) * 2
            return self.head(torch.relu(t[:, 0]))

    model = Tokens().eval()
    for opset in (13, 17):
        torch.onnx.export(model, torch.randn(2, 6, 4), os.path.join(OUT, f"tokens_{opset}.onnx"), input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          opset_version=opset)
    for batch in (2, 5):
        x = torch.randn(batch, 6, 4)
        np.save(os.path.join(OUT, f"tokens_x_{batch}.npy"), x.numpy())
        np.save(os.path.join(OUT, f"tokens_y_{batch}.npy"), model(x).detach().numpy())


def class_token_export():
    """A ViT's front in miniature, exported by PyTorch with a dynamic batch: patches by a strided
    convolution, a learned class token expanded to the batch (a Weight broadcast to the symbolic
    batch), concatenated, plus learned positions; then a comparison with a constant and a Where
    with a learned fill (constant operands of run-time ops). Expected outputs are PyTorch's, at
    batch 2 and 3."""
    import torch

    torch.manual_seed(8)

    class Front(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = torch.nn.Conv2d(3, 8, 4, stride=4)
            self.cls = torch.nn.Parameter(torch.randn(1, 1, 8))
            self.pos = torch.nn.Parameter(torch.randn(1, 5, 8))
            self.fill = torch.nn.Parameter(torch.randn(8))

        def forward(self, x):  # x: [batch, 3, 8, 8]
            n = x.shape[0]
            p = self.patch(x).flatten(2).transpose(1, 2)  # [n, 4, 8]
            t = torch.cat([self.cls.expand(n, -1, -1), p], dim=1) + self.pos  # [n, 5, 8]
            return torch.where(t > 0.5, t, self.fill)

    model = Front().eval()
    torch.onnx.export(model, torch.randn(2, 3, 8, 8), os.path.join(OUT, "class_token.onnx"), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=13)
    for batch in (2, 3):
        x = torch.randn(batch, 3, 8, 8)
        np.save(os.path.join(OUT, f"class_token_x_{batch}.npy"), x.numpy())
        np.save(os.path.join(OUT, f"class_token_y_{batch}.npy"), model(x).detach().numpy())


if __name__ == "__main__":
    main()
