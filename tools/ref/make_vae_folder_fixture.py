#!/usr/bin/python3
"""Writes a diffusers-layout VAE folder as the SD-VAE is published (tests/test_vae.c, test_vae_folder).

Run with Debian's python, which has torch 1.13:  /usr/bin/python3 tools/ref/make_vae_folder_fixture.py

    tests/fixtures/vae_tiny_bin/diffusion_pytorch_model.bin   vae_tiny_old.safetensors' random weights
        (query/key/value/proj_attn names, as sd-vae-ft-ema's and -mse's .bin were first published)
        saved by torch.save (zip format): a state dict of float32 tensors
    tests/fixtures/vae_tiny_bin/config.json   diffusers' AutoencoderKL config of that network; its
        norm_num_groups (2) is stated nowhere else, scaling_factor is the SD-VAE's 0.18215
and the seeds of tests/fuzz/fuzz_vae_config.c in tests/fuzz/seeds/vae_config/.
"""

import collections
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures")


def config_of(t, groups):
    levels = 0
    while f"encoder.down_blocks.{levels}.resnets.0.conv1.weight" in t:
        levels += 1
    layers = 0
    while f"encoder.down_blocks.0.resnets.{layers}.conv1.weight" in t:
        layers += 1
    return collections.OrderedDict([
        ("_class_name", "AutoencoderKL"),
        ("_diffusers_version", "0.4.2"),
        ("act_fn", "silu"),
        ("block_out_channels", [int(t[f"encoder.down_blocks.{i}.resnets.0.conv1.weight"].shape[0])
                                for i in range(levels)]),
        ("down_block_types", ["DownEncoderBlock2D"] * levels),
        ("in_channels", int(t["encoder.conv_in.weight"].shape[1])),
        ("latent_channels", int(t["encoder.conv_out.weight"].shape[0] // 2)),
        ("layers_per_block", layers),
        ("norm_num_groups", groups),
        ("out_channels", int(t["decoder.conv_out.weight"].shape[0])),
        ("sample_size", 32),
        ("scaling_factor", 0.18215),
        ("up_block_types", ["UpDecoderBlock2D"] * levels),
    ])


def main():
    tensors, meta = st_io.load(os.path.join(FIX, "vae_tiny_old.safetensors"))
    out = os.path.join(FIX, "vae_tiny_bin")
    os.makedirs(out, exist_ok=True)
    sd = collections.OrderedDict((k, torch.from_numpy(tensors[k].copy())) for k in sorted(tensors))
    torch.save(sd, os.path.join(out, "diffusion_pytorch_model.bin"))
    cfg = config_of(tensors, int(meta["norm_num_groups"]))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")

    seeds = os.path.join(ROOT, "tests", "fuzz", "seeds", "vae_config")
    os.makedirs(seeds, exist_ok=True)
    with open(os.path.join(seeds, "tiny.json"), "w") as f:
        json.dump(cfg, f)
    sd_cfg = dict(cfg, block_out_channels=[128, 256, 512, 512], norm_num_groups=32, sample_size=256)
    del sd_cfg["scaling_factor"]  # sd-vae-ft-ema's config.json as published: no scaling_factor
    with open(os.path.join(seeds, "sd_ft_ema.json"), "w") as f:
        json.dump(sd_cfg, f, indent=2)
    with open(os.path.join(seeds, "sdxl.json"), "w") as f:
        json.dump(dict(sd_cfg, scaling_factor=0.13025, force_upcast=True, sample_size=1024), f)


if __name__ == "__main__":
    main()
