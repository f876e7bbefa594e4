#!/usr/bin/python3
"""Reference fixtures for tests/test_sample.c: a whole DDIM sampling run of a tiny random DiT.

Run it with Debian's python (torch 1.13 + numpy):

    /usr/bin/python3 tools/ref/ref_sample.py

Writes
  tests/fixtures/sample_model.safetensors   a model file written the way a PyTorch user writes one:
                                            st_io.save(model.state_dict(), docs/design.md §2 __metadata__)
  tests/fixtures/sample_bad_shape.safetensors  the same file with one tensor of the wrong shape
                                            (blocks.1.attn.lepe.weight as [H,1,3,3] while the
                                            metadata says lepe 5): loading must be refused
  tests/fixtures/sample_noise.npy           initial noise x_T, float32 [4, 1, 8, 8]
  tests/fixtures/sample_ddim_out.npy        the samples, float32 [4, 1, 8, 8]

The run (docs/design.md §3): linear betas, T = 1000, ADM respacing to 10 steps (space_timesteps, one
section), DDIM eta 0, clip_denoised on, classifier-free guidance w = 4 on ALL image channels of
eps with the conditional and null halves in one batch (ref_dit.DiT.forward_with_cfg: variance
channels from the conditional half), the network given the ORIGINAL timesteps, labels 0, 2, 1, 2.

The sampler below is ADM's gaussian_diffusion.py ddim_sample / p_mean_variance written out in
PyTorch float32 the way ADM evaluates it: tables in numpy float64, gathered per step and cast to
float32 (_extract_into_tensor), then float32 arithmetic. The same run in float64 (model and
sampler) is computed too and the float32 fixture must agree with it to 2e-5, so the 1e-4 test
tolerance measures the C code and not float32 noise in the reference.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_diffusion  # noqa: E402  (sets torch's default dtype to float64; reset below)
import ref_dit  # noqa: E402
import st_io  # noqa: E402

torch.set_default_dtype(torch.float32)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")

MODEL_KW = dict(depth=2, hidden_size=32, num_heads=2, patch_size=2, input_size=8, in_channels=1,
                num_classes=3, learn_sigma=True, attn="mala", rope=True, lepe=5, gate=False,
                class_names=["circle", "square", "ring"])
LABELS = [0, 2, 1, 2]
STEPS = 10
CFG_SCALE = 4.0
# A random network is no denoiser, so many predicted x0 land on the clip bounds; with this seed
# about half of the final samples stay inside (-1, 1) (checked below), so the comparison
# exercises the whole arithmetic and not only the clamp.
SEED = 3


def extract(arr, t, dtype):
    """ADM _extract_into_tensor: numpy float64 table gathered at t, cast to dtype, [n,1,1,1]."""
    return torch.from_numpy(arr)[t].to(dtype).view(-1, 1, 1, 1)


def ddim_sample_loop(model, d, x_T, y, cfg_scale, clip=True, eta=0.0):
    """ADM ddim_sample_loop over the respaced process d (ref_diffusion.Diffusion) with DiT's
    classifier-free guidance wrapper; the respaced index i is mapped to the original timestep
    (ADM's _WrappedModel) before the network sees it."""
    dtype = x_T.dtype
    x = x_T.clone()
    n = x.shape[0]
    C = x.shape[1]
    tmap = torch.tensor(d.timestep_map, dtype=torch.int64)
    for i in reversed(range(d.T)):
        t = torch.full((n,), i, dtype=torch.int64)
        with torch.no_grad():
            out = model.forward_with_cfg(x, tmap[t].to(dtype), y, cfg_scale)
        eps = out[:, :C]  # the variance half (learned range) does not enter DDIM
        pred_x0 = extract(d.sqrt_recip_alphas_cumprod, t, dtype) * x - \
            extract(d.sqrt_recipm1_alphas_cumprod, t, dtype) * eps
        if clip:
            pred_x0 = pred_x0.clamp(-1, 1)
        eps = (extract(d.sqrt_recip_alphas_cumprod, t, dtype) * x - pred_x0) / \
            extract(d.sqrt_recipm1_alphas_cumprod, t, dtype)
        ab = extract(d.alphas_cumprod, t, dtype)
        abp = extract(d.alphas_cumprod_prev, t, dtype)
        sigma = eta * torch.sqrt((1 - abp) / (1 - ab)) * torch.sqrt(1 - ab / abp)
        x = pred_x0 * torch.sqrt(abp) + torch.sqrt(1 - abp - sigma ** 2) * eps
        # eta = 0: no noise term (ADM adds nonzero_mask * sigma * noise, which is 0 here)
    return x


def build_model():
    gen = torch.Generator().manual_seed(SEED)
    model = ref_dit.DiT(**MODEL_KW)
    ref_dit.fixture_init(model, gen)  # float32 module: fixture_init rounds to float32 anyway
    model.eval()  # no label dropout
    return model, gen


def main():
    os.makedirs(FIX, exist_ok=True)
    model, gen = build_model()
    S, C = MODEL_KW["input_size"], MODEL_KW["in_channels"]

    # The model file exactly as a PyTorch user writes it: the state_dict (pos_embed included)
    # and the configuration in __metadata__.
    sd = model.state_dict()
    meta = model.metadata()
    path = os.path.join(FIX, "sample_model.safetensors")
    st_io.save(path, sd, meta)
    # ...and it loads back into a fresh module (strict names and shapes).
    sd2, meta2 = st_io.load_state_dict(path)
    m2 = ref_dit.DiT.from_metadata(meta2)
    m2.load_state_dict(sd2)
    assert meta2 == meta

    bad = {k: v for k, v in sd.items()}
    H = MODEL_KW["hidden_size"]
    bad["blocks.1.attn.lepe.weight"] = torch.zeros(H, 1, 3, 3)
    st_io.save(os.path.join(FIX, "sample_bad_shape.safetensors"), bad, meta)

    x_T = torch.randn(len(LABELS), C, S, S, generator=gen, dtype=torch.float64).float()
    np.save(os.path.join(FIX, "sample_noise.npy"), x_T.numpy())

    base = ref_diffusion.Diffusion(ref_diffusion.named_betas("linear", 1000))
    d = ref_diffusion.respaced(base, STEPS)
    assert len(d.timestep_map) == STEPS
    y = torch.tensor(LABELS, dtype=torch.int64)

    x32 = ddim_sample_loop(model, d, x_T, y, CFG_SCALE)
    x64 = ddim_sample_loop(model.double(), d, x_T.double(), y, CFG_SCALE)
    gap = float((x32.double() - x64).abs().max())
    inside = float(((x32.abs() < 0.999).float().mean()))
    assert gap < 2e-5, f"float32 reference is {gap:.3g} from float64: tolerance would be meaningless"
    assert inside > 0.4, f"only {inside:.0%} of the samples are off the clip bounds"
    # guidance matters: the unguided run differs clearly
    x1 = ddim_sample_loop(model.float(), d, x_T, y, 1.0)
    assert float((x1 - x32).abs().max()) > 0.1

    out = x32.numpy().astype(np.float32)
    np.save(os.path.join(FIX, "sample_ddim_out.npy"), out)
    print(f"timesteps {d.timestep_map}")
    print(f"wrote sample_model.safetensors, sample_bad_shape.safetensors, sample_noise.npy, "
          f"sample_ddim_out.npy: range [{out.min():.3f}, {out.max():.3f}], {inside:.0%} inside "
          f"(-0.999, 0.999), float32 vs float64 max gap {gap:.2e}, unguided differs by "
          f"{float((x1 - x32).abs().max()):.3f}")


if __name__ == "__main__":
    main()
