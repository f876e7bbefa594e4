#!/usr/bin/python3
"""Reference fixtures for tests/test_sample.c: DiT's 3-channel classifier-free guidance
(`--cfg-channels 3`) against all-channel guidance, on a tiny random 4-channel DiT.

Run it with Debian's python (torch 1.13 + numpy):

    /usr/bin/python3 tools/ref/ref_cfg_channels.py

Writes
  tests/fixtures/cfg4_model.safetensors  a random DiT with 4 input channels and learned variance
                                         (8 output channels), 3 classes, 8x8, depth 2
  tests/fixtures/cfg4_ref.npz            x_T [4,4,8,8], z [10,4,4,8,8] (the per-step noise of the
                                         first half), dit3 and all [4,4,8,8]: the samples

The runs are DiT's sample.py: DDPM over 10 respaced steps (ADM's p_sample with the learned-range
variance), guidance w = 4 through
forward_with_cfg on the doubled batch z = [x; x], y = [y; null], the samples being the first half.
forward_with_cfg below states DiT's models.py function (facebookresearch/DiT) in our own code,
the channel count its only parameter: `dit3` guides the first 3 output channels as DiT does (the
4th eps channel and the 4 variance channels of each half are that half's own, so the first half's are conditional);
`all` guides all input channels, DiT's commented-out alternative (every eps channel
guided, the variance conditional). The model and the sampler run in float64, so the fixture is
the exact arithmetic the C code (float32 network, float64 per-element updates) approximates.
clip_denoised is on (DiT's latents run with it off): a random network is no denoiser, and without
the clip its samples grow to 1e3 by 1/sqrt(abar) = 156 per step; with it about half the samples
stay inside (-1, 1) (checked), so the comparison sees the whole arithmetic, not only the clamp.

Checks of the reference itself: the two runs differ clearly, and only through the 4th channel's
guidance (every channel of the samples moves, since the network mixes channels).
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_diffusion  # noqa: E402
import ref_dit  # noqa: E402
import st_io  # noqa: E402

torch.set_default_dtype(torch.float64)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")

MODEL_KW = dict(depth=2, hidden_size=32, num_heads=2, patch_size=2, input_size=8, in_channels=4,
                num_classes=3, learn_sigma=True, attn="mala", rope=True, lepe=5, gate=False,
                class_names=["a", "b", "c"])
LABELS = [0, 2, 1, 2]
STEPS = 10
CFG_SCALE = 4.0
SEED = 11


def forward_with_cfg(model, x, t, y, cfg_scale, channels):
    """Classifier-free guidance as DiT applies it (our code, same math): the network sees the
    first half of the batch twice, conditioned on y's two halves (label, then null). In the
    leading `channels` output channels every row gets the guided noise estimate
    e = e_null + w * (e_label - e_null); the remaining channels keep each row's own output."""
    n = len(x) // 2
    first = x[:n]
    out = model.forward(torch.cat((first, first)), t, y)
    e_label, e_null = out[:n, :channels], out[n:, :channels]
    guided = e_null + cfg_scale * (e_label - e_null)
    out = out.clone()
    out[:n, :channels] = guided
    out[n:, :channels] = guided
    return out


def ddpm_dit(model, d, x_T, y, z, channels):
    """DiT sample.py: p_sample_loop over the doubled batch, forward_with_cfg, clip on; the
    network sees the ORIGINAL timesteps (ADM's _WrappedModel); returns the first half."""
    n = x_T.shape[0]
    null = torch.full_like(y, MODEL_KW["num_classes"])
    x = torch.cat([x_T, x_T])
    yy = torch.cat([y, null])
    tmap = torch.tensor(d.timestep_map, dtype=torch.float64)
    for step, i in enumerate(reversed(range(d.T))):
        t = torch.full((2 * n,), i, dtype=torch.int64)
        with torch.no_grad():
            out = forward_with_cfg(model, x, tmap[t], yy, CFG_SCALE, channels)
        mean, log_var, _ = ref_diffusion.p_mean_variance(d, out, x, t, True, torch.float64)
        if i > 0:
            noise = torch.cat([z[step], z[step]])
            x = mean + torch.exp(0.5 * log_var) * noise
        else:
            x = mean
    return x[:n]


def main():
    os.makedirs(FIX, exist_ok=True)
    gen = torch.Generator().manual_seed(SEED)
    model = ref_dit.DiT(**MODEL_KW)
    ref_dit.fixture_init(model, gen)
    model.eval()
    st_io.save(os.path.join(FIX, "cfg4_model.safetensors"), model.state_dict(), model.metadata())
    model = model.double()
    C, S, n = MODEL_KW["in_channels"], MODEL_KW["input_size"], len(LABELS)
    x_T = torch.randn(n, C, S, S, generator=gen, dtype=torch.float64).float()
    z = torch.randn(STEPS, n, C, S, S, generator=gen, dtype=torch.float64).float()
    d = ref_diffusion.respaced(ref_diffusion.Diffusion(ref_diffusion.named_betas("linear", 1000)), STEPS)
    y = torch.tensor(LABELS, dtype=torch.int64)
    dit3 = ddpm_dit(model, d, x_T.double(), y, z.double(), 3)
    full = ddpm_dit(model, d, x_T.double(), y, z.double(), C)
    gap = float((dit3 - full).abs().max())
    assert gap > 0.05, f"3-channel and all-channel guidance hardly differ ({gap:.3g})"
    inside = float((dit3.abs() < 0.999).double().mean())
    assert inside > 0.3, f"only {inside:.0%} of the samples are off the clip bounds"
    np.savez(os.path.join(FIX, "cfg4_ref.npz"), x_T=x_T.numpy(), z=z.numpy(),
             dit3=dit3.numpy().astype(np.float32), all=full.numpy().astype(np.float32))
    print(f"wrote cfg4_model.safetensors, cfg4_ref.npz: timesteps {d.timestep_map}, samples in "
          f"[{float(dit3.min()):.3f}, {float(dit3.max()):.3f}], {inside:.0%} inside (-0.999, 0.999), "
          f"3 vs all channels differ by {gap:.3f} (max abs)")


if __name__ == "__main__":
    main()
