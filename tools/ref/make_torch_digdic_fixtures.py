#!/usr/bin/python3
"""Writes DiG and DiC state dicts in torch.save's zip format (tests/test_cli.c, test_sample_torch_digdic).

Run with Debian's python, which has torch 1.13:  /usr/bin/python3 tools/ref/make_torch_digdic_fixtures.py

The weights are those of our own fixtures, whose tensor names are the official repositories'
(docs/formats.md), so each .pt is what DiG's or DiC's training would have saved for that network:
    torchzip_dig.pt     dig_t2.safetensors' model tensors (depth 2, hidden 16, 2 heads, patch 2,
                        8x8x1, 3 classes, learned sigma) as a bare state dict
    torchzip_dic.pt     dic_t1.safetensors' (hidden 2 x [3,4,6,4,3], depths [3,2,1,2,3], skip stride 2,
                        8x8x1, 3 classes, learned sigma) as a {model, ema, args} training checkpoint
                        whose args.image_size = 8 (a DiC file records its image size nowhere else)
    torchzip_nofit.pt   torchzip_dig.pt's tensors with one that no backbone has (blocks.0.attn.rotary.weight)
                        after blocks.0.attn.k_proj.weight
    torchzip_alien.pt   a state dict of no backbone at all (conv1.weight, fc.weight)
"""

import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")


def model_tensors(name):
    """The model's tensors of one of our fixtures (no grad.*, in.*, out: the reference's inputs and outputs)."""
    tensors, _ = st_io.load(os.path.join(FIX, name))
    keep = [k for k in sorted(tensors) if not k.startswith(("grad.", "in.", "opt.", "ema.")) and k != "out"]
    return collections.OrderedDict((k, torch.from_numpy(tensors[k].copy())) for k in keep)


def main():
    dig = model_tensors("dig_t2.safetensors")
    torch.save(dig, os.path.join(FIX, "torchzip_dig.pt"))

    dic = model_tensors("dic_t1.safetensors")
    args = argparse.Namespace(model="DiC-T", image_size=8, num_classes=3, results_dir="results")
    # ema and model share their tensors (torch.save writes each storage once): the file stays small
    torch.save({"model": dic, "ema": collections.OrderedDict(dic), "args": args},
               os.path.join(FIX, "torchzip_dic.pt"))

    nofit = collections.OrderedDict()
    for k, v in dig.items():
        nofit[k] = v
        if k == "blocks.0.attn.k_proj.weight":
            nofit["blocks.0.attn.rotary.weight"] = torch.ones(4)
    torch.save(nofit, os.path.join(FIX, "torchzip_nofit.pt"))

    torch.manual_seed(0)
    torch.save(collections.OrderedDict([("conv1.weight", torch.randn(4, 3, 3, 3)), ("fc.weight", torch.randn(2, 4))]),
               os.path.join(FIX, "torchzip_alien.pt"))


if __name__ == "__main__":
    main()
