#!/usr/bin/python3
"""Reference fixtures for tests/test_sample.c: DPM-Solver++(2M) runs of the tiny DiT of
tools/ref/ref_sample.py, from its initial noise.

Run it with Debian's python (torch 1.13 + numpy), after tools/ref/ref_sample.py:

    /usr/bin/python3 tools/ref/ref_dpm.py

Reads  tests/fixtures/sample_model.safetensors, tests/fixtures/sample_noise.npy
Writes tests/fixtures/sample_dpmpp_out.npy     10 steps, guidance w = 4, float32 [4, 1, 8, 8]
       tests/fixtures/sample_dpmpp_w1_out.npy  8 steps, no guidance

The C sampler is 1.7e-5 (w 4) and 5.6e-5 (w 1) from these (max abs): what it measures beyond the
solver is the C network's float32 rounding, amplified by 1/sqrt(abar) = 156 at t = 999 (DDIM on
this model is up to 7e-5 from float64 for the same reason).

The solver (Lu et al. 2022, "DPM-Solver++", Algorithm 2 = the official dpm_solver's
multistep_dpm_solver_second_update with solver_type 'dpmsolver', and diffusers'
DPMSolverMultistepScheduler with algorithm_type "dpmsolver++", solver_order 2,
lower_order_final, final_sigmas_type "zero"), written out here from the paper, on the discrete
DDPM process: alpha_t = sqrt(abar_t), sigma_t = sqrt(1 - abar_t), lambda_t = log alpha_t -
log sigma_t, with abar from the process respaced to N + 1 timesteps (ADM/DiT
space_timesteps(1000, [N + 1]) = round(k 999 / N), k = 0 .. N), N network evaluations at
k = N .. 1, the step after the last one (from k = 1) going to sigma = 0 (lambda = +inf), where the
first-order update is x = x0; t = 0 is never evaluated. The network is given the ORIGINAL
timesteps, the data prediction is x0 = (x - sigma eps) / alpha from the eps half of the
learned-variance output, clipped to [-1, 1] (clip_denoised). Everything is float64 (model and
solver): the fixture is the exact arithmetic the C code (float32 state, float64 per-element
updates) approximates.

Checks of the reference itself: with solver order 1 it is DDIM (eta 0) over the N evaluated
timesteps to 1e-9 (DPM-Solver-1 is DDIM), and order 2 differs clearly from order 1.
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_diffusion  # noqa: E402
import ref_dit  # noqa: E402
import ref_sample  # noqa: E402
import st_io  # noqa: E402

torch.set_default_dtype(torch.float64)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")
LABELS = ref_sample.LABELS
RUNS = [("sample_dpmpp_out.npy", 10, 4.0), ("sample_dpmpp_w1_out.npy", 8, 1.0)]


def dpm_solver_pp_2m(model, d, x_T, y, cfg_scale, order=2, clip=True):
    """DPM-Solver++(2M) over the N + 1 point process d (ref_diffusion.Diffusion), float64."""
    C = x_T.shape[1]
    ab = [float(a) for a in d.alphas_cumprod]
    alpha = lambda i: math.sqrt(ab[i]) if i > 0 else 1.0  # noqa: E731  (i = 0: the data)
    sigma = lambda i: math.sqrt(1.0 - ab[i]) if i > 0 else 0.0  # noqa: E731
    lam = lambda i: math.log(alpha(i)) - (math.log(sigma(i)) if i > 0 else -math.inf)  # noqa: E731
    x = x_T.clone()
    prev = None  # (x0, lambda) of the previous step
    n = x.shape[0]
    for i in reversed(range(1, d.T)):
        tt = torch.full((n,), float(d.timestep_map[i]))
        with torch.no_grad():
            out = model.forward_with_cfg(x, tt, y, cfg_scale) if cfg_scale != 1.0 else model(x, tt, y)
        eps = out[:, :C]
        x0 = (x - sigma(i) * eps) / alpha(i)
        if clip:
            x0 = x0.clamp(-1, 1)
        s, t = i, i - 1  # from lambda_s to lambda_t
        h = lam(t) - lam(s)
        phi = math.expm1(-h)  # -1 when t is the data (h = inf)
        final = t == 0
        if prev is None or order == 1 or final:  # first order (DDIM); lower_order_final
            D = x0
        else:
            r0 = (lam(s) - prev[1]) / h
            D = x0 + 0.5 / r0 * (x0 - prev[0])  # D0 + D1 / 2, D1 = (x0 - x0_prev) / r0
        x = (sigma(t) / sigma(s)) * x - alpha(t) * phi * D
        prev = (x0, lam(s))
    return x


def respaced_to(base, use):
    """The process over the original timesteps `use` (ref_diffusion.respaced's construction)."""
    last, betas = 1.0, []
    for i, ac in enumerate(base.alphas_cumprod):
        if i in use:
            betas.append(1 - ac / last)
            last = ac
    return ref_diffusion.Diffusion(np.array(betas), sorted(use), base.original_T)


def main():
    sd, meta = st_io.load_state_dict(os.path.join(FIX, "sample_model.safetensors"))
    model = ref_dit.DiT.from_metadata(meta)
    model.load_state_dict(sd)
    model = model.double().eval()
    x_T = torch.from_numpy(np.load(os.path.join(FIX, "sample_noise.npy"))).double()
    y = torch.tensor(LABELS, dtype=torch.int64)
    base = ref_diffusion.Diffusion(ref_diffusion.named_betas("linear", 1000))
    for name, steps, w in RUNS:
        d = ref_diffusion.respaced(base, steps + 1)
        x = dpm_solver_pp_2m(model, d, x_T, y, w)
        x1 = dpm_solver_pp_2m(model, d, x_T, y, w, order=1)
        ddim = ref_sample.ddim_sample_loop(model, respaced_to(base, set(d.timestep_map[1:])), x_T, y, w)
        gap_ddim = float((x1 - ddim).abs().max())
        assert gap_ddim < 1e-9, f"order 1 is not DDIM: {gap_ddim:.3g}"
        second = float((x - x1).abs().max())
        assert second > 0.05, f"the second-order term hardly matters ({second:.3g})"
        inside = float((x.abs() < 0.999).double().mean())
        assert inside > 0.3, f"only {inside:.0%} of the samples are off the clip bounds"
        out = x.numpy().astype(np.float32)
        np.save(os.path.join(FIX, name), out)
        print(f"{name}: {steps} steps, w {w}, timesteps {d.timestep_map[1:]}, range [{out.min():.3f}, "
              f"{out.max():.3f}], {inside:.0%} inside (-0.999, 0.999); order 1 vs DDIM {gap_ddim:.1e}, "
              f"order 2 vs 1 {second:.3f}")


if __name__ == "__main__":
    main()
