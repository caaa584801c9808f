#!/usr/bin/python3
"""Exports torchvision's classification models and a small decoder-only transformer to ONNX, with
their expected outputs, for tests/onnx/models.sh: an import check on models nobody here wrote.

Debian's python3-torch (1.13) and python3-torchvision (0.14), nothing downloaded: random weights
(seeded) and randomised BatchNorm statistics, so that an import that drops or mixes up a
BatchNorm's running mean or variance gives a different answer; parameters initialised to zeros
(biases, ViT's class token and head) are random too. Each model is exported at opsets 13
and 17 with a dynamic batch dim, and run by PyTorch at batch 1 and 4 for the expected outputs.

    /usr/bin/python3 tools/make_onnx_models.py OUT_DIR [MODEL ...]

writes OUT_DIR/<model>_<opset>.onnx, OUT_DIR/<model>_x_<batch>.npy and _y_<batch>.npy.
"""
import os
import sys

import numpy as np
import torch
import torchvision

# name -> (constructor, input shape without the batch dim)
VISION = {
    "resnet18": (lambda: torchvision.models.resnet18(), (3, 224, 224)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), (3, 224, 224)),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(), (3, 224, 224)),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(), (3, 224, 224)),
    "shufflenet_v2_x0_5": (lambda: torchvision.models.shufflenet_v2_x0_5(), (3, 224, 224)),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(), (3, 224, 224)),
    "densenet121": (lambda: torchvision.models.densenet121(), (3, 224, 224)),
    "googlenet": (lambda: torchvision.models.googlenet(aux_logits=False, init_weights=True), (3, 224, 224)),
    "convnext_tiny": (lambda: torchvision.models.convnext_tiny(), (3, 224, 224)),
    "regnet_y_400mf": (lambda: torchvision.models.regnet_y_400mf(), (3, 224, 224)),
    "vit_small": (lambda: torchvision.models.VisionTransformer(image_size=64, patch_size=16, num_layers=2,
                                                               num_heads=4, hidden_dim=64, mlp_dim=128,
                                                               num_classes=10), (3, 64, 64)),
}


class Decoder(torch.nn.Module):
    """A decoder-only transformer over token ids: embeddings, a causal mask, pre-norm blocks with
    exact GELU, a language-model head."""

    def __init__(self, vocab=50, dim=32, heads=4, layers=2, context=16):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, dim)
        self.positions = torch.nn.Embedding(context, dim)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), diagonal=1))

    def forward(self, ids):  # ids: [batch, context]
        x = self.tokens(ids) + self.positions.weight
        return self.head(self.norm(self.blocks(x, mask=self.mask)))


def randomise_batch_norms(model, generator):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) * 0.5 + 0.75)


def randomise_zero_parameters(model, generator):
    """Parameters initialised to zeros (biases, ViT's class token and head) get random values: a
    zero hides an import that drops them or broadcasts them wrongly (ViT's output was all zeros)."""
    for p in model.parameters():
        if not p.any():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.1)


def export(name, out):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    if name == "decoder":
        model, shape = Decoder(), (16,)
        example = lambda b: torch.randint(0, 50, (b, *shape), generator=generator)
    else:
        make, shape = VISION[name]
        model = make()
        example = lambda b: torch.randn((b, *shape), generator=generator)
    with torch.no_grad():
        randomise_batch_norms(model, generator)
        randomise_zero_parameters(model, generator)
    model.eval()
    for opset in (13, 17):
        torch.onnx.export(model, example(1), os.path.join(out, f"{name}_{opset}.onnx"), input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          opset_version=opset)
    for batch in (1, 4):
        x = example(batch)
        with torch.no_grad():
            y = model(x)
        np.save(os.path.join(out, f"{name}_x_{batch}.npy"), x.numpy())
        np.save(os.path.join(out, f"{name}_y_{batch}.npy"), y.numpy())


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or [*VISION, "decoder"]
    os.makedirs(out, exist_ok=True)
    for name in names:
        export(name, out)
        print(f"exported {name}", flush=True)


if __name__ == "__main__":
    main()
