#!/usr/bin/python3
"""A DiT-XL/2-shaped state dict at 256x256 (32x32x4 latents, 1000 classes, learned sigma) with
DiT's names and random float16 values (0.02 N(0, 1), seeded), written by torch.save's zip format,
as DiT's released DiT-XL-2-256x256.pt is laid out. Not a fixture (1.35 GB): docs/pretrained.md's
time and memory figures are measured on it. Run with /usr/bin/python3 (torch 1.13):
    /usr/bin/python3 tools/ref/make_xl_shaped.py OUT.pt"""
import sys

import torch

H, DEPTH, P, C, GRID, CLASSES = 1152, 28, 2, 4, 32, 1000


def shapes():
    yield "pos_embed", (1, (GRID // P) ** 2, H)
    yield "x_embedder.proj.weight", (H, C, P, P)
    yield "x_embedder.proj.bias", (H,)
    yield "t_embedder.mlp.0.weight", (H, 256)
    yield "t_embedder.mlp.0.bias", (H,)
    yield "t_embedder.mlp.2.weight", (H, H)
    yield "t_embedder.mlp.2.bias", (H,)
    yield "y_embedder.embedding_table.weight", (CLASSES + 1, H)
    for i in range(DEPTH):
        b = "blocks.%d." % i
        yield b + "attn.qkv.weight", (3 * H, H)
        yield b + "attn.qkv.bias", (3 * H,)
        yield b + "attn.proj.weight", (H, H)
        yield b + "attn.proj.bias", (H,)
        yield b + "mlp.fc1.weight", (4 * H, H)
        yield b + "mlp.fc1.bias", (4 * H,)
        yield b + "mlp.fc2.weight", (H, 4 * H)
        yield b + "mlp.fc2.bias", (H,)
        yield b + "adaLN_modulation.1.weight", (6 * H, H)
        yield b + "adaLN_modulation.1.bias", (6 * H,)
    yield "final_layer.linear.weight", (P * P * 2 * C, H)
    yield "final_layer.linear.bias", (P * P * 2 * C,)
    yield "final_layer.adaLN_modulation.1.weight", (2 * H, H)
    yield "final_layer.adaLN_modulation.1.bias", (2 * H,)


def main():
    gen = torch.Generator().manual_seed(28)
    sd = {k: (0.02 * torch.randn(s, generator=gen)).half() for k, s in shapes()}
    torch.save(sd, sys.argv[1])
    print("wrote %s: %d tensors, %d parameters" % (sys.argv[1], len(sd), sum(v.numel() for v in sd.values())))


if __name__ == "__main__":
    main()
