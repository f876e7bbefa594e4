#!/usr/bin/python3
"""The PyTorch reference's DDIM run on tests/fixtures/torchzip_sd.pt (a DiT state dict written by
torch.save, tools/ref/make_torch_zip_fixtures.py), for tests/test_torch_zip.c: mala's samples from
the .pt file must match it within 2e-3.

    /usr/bin/python3 tools/ref/ref_sample_torchzip.py

Writes
  tests/fixtures/torchzip_ddim_noise.npy   initial noise x_T, float32 [4, 4, 8, 8]
  tests/fixtures/torchzip_ddim_out.npy     the samples (latents), float32 [4, 4, 8, 8]

The run: the state dict loaded with torch.load into the reference DiT (depth 1, hidden 16, 2 heads,
patch 2, 4x8x8 latents, 4 classes, learned sigma, softmax attention: DiT's network), linear betas,
T = 1000 respaced to 10 DDIM steps, eta 0, guidance 4 on every latent channel, no clipping (a latent
model's x0 is not clipped), labels 0, 3, 1, 2; the sampler of tools/ref/ref_sample.py.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_diffusion  # noqa: E402  (sets torch's default dtype to float64; reset below)
import ref_dit  # noqa: E402
from ref_sample import ddim_sample_loop  # noqa: E402

torch.set_default_dtype(torch.float32)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")
LABELS = [0, 3, 1, 2]


def main():
    sd = torch.load(os.path.join(FIX, "torchzip_sd.pt"))
    model = ref_dit.DiT(input_size=8, patch_size=2, in_channels=4, hidden_size=16, depth=1, num_heads=2,
                        num_classes=4, learn_sigma=True, attn="softmax", rope=False, lepe=0, gate=False)
    model.load_state_dict(sd)
    model.eval()
    gen = torch.Generator().manual_seed(7)
    x_T = torch.randn(len(LABELS), 4, 8, 8, generator=gen, dtype=torch.float64).float()
    d = ref_diffusion.respaced(ref_diffusion.Diffusion(ref_diffusion.named_betas("linear", 1000)), 10)
    y = torch.tensor(LABELS, dtype=torch.int64)
    x32 = ddim_sample_loop(model, d, x_T, y, 4.0, clip=False)
    x64 = ddim_sample_loop(model.double(), d, x_T.double(), y, 4.0, clip=False)
    gap = float((x32.double() - x64).abs().max())
    assert gap < 2e-4, f"float32 reference is {gap:.3g} from float64 (the test allows 2e-3)"
    np.save(os.path.join(FIX, "torchzip_ddim_noise.npy"), x_T.numpy())
    np.save(os.path.join(FIX, "torchzip_ddim_out.npy"), x32.numpy().astype(np.float32))
    print(f"wrote torchzip_ddim_noise.npy, torchzip_ddim_out.npy (float32 vs float64 reference: {gap:.2g})")


if __name__ == "__main__":
    main()
