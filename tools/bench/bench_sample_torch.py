#!/usr/bin/python3
"""PyTorch eager peer of `mala bench sample`: the same model, flags, protocol and JSON line.

    /usr/bin/python3 tools/bench/bench_sample_torch.py --model DiT-S/2 --sampler ddim --steps 10 --n 8 \\
        --threads 2
    /usr/bin/python3 tools/bench/bench_sample_torch.py --backbone dig --model DiG-S/2 --steps 10 --n 8
    /usr/bin/python3 tools/bench/bench_sample_torch.py --backbone dic --model DiC-S --steps 10 --n 8

As the C bench (cli/cmd_bench.c): a randomly initialised model (docs/design.md §2's DiT init) of the given
shape, linear betas T = 1000 respaced to --steps (ADM space_timesteps), n images from a fixed
random batch (seed 2); one run without guidance (w = 1: one pass of n per step) and one with
--cfg-scale (one pass of 2n per step: [x; x] with [y; null], eps guided on all channels,
variance from the conditional half), each timed from start to end after an untimed one-step run of
each kind (the warm-up); clip on, DDIM eta 0. img_per_s = n / seconds of a run. The sampler is ADM's
ddim_sample / p_sample in float32 under torch.inference_mode(); --precision bf16 runs the model's
forward under torch.autocast(device, torch.bfloat16); --precision int8 (CPU) runs it with every nn.Linear
of the transformer blocks replaced by torch.ao.quantization.quantize_dynamic's int8 linear (per-tensor int8 weights, activations
quantised dynamically per call; the quantized engine PyTorch picks, onednn in Debian's 1.13), which is
how a PyTorch user quantises a transformer for CPU inference.
Model flags (--backbone dit|dig|dic included), --threads, --device, --precision and --compile as
in tools/bench/bench_train_torch.py (with --compile, the warm-up compiles); DiG is tools/ref_dig.DiG and
DiC tools/ref_dic.DiC, each with its official init.
"""
import argparse
import contextlib
import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before torch loads libgomp, as ./mala does

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))  # the references
import bench_train_torch as btt  # noqa: E402  (model flags, presets, helpers)
import ref_diffusion  # noqa: E402

torch.set_default_dtype(torch.float32)


def extract(arr, i, n, dev):
    return torch.full((n, 1, 1, 1), float(arr[i]), dtype=torch.float32, device=dev)


def sample_loop(model, d, x, y, w, kind, eta=0.0, clip=True, ac=None):
    """ADM p_sample_loop / ddim_sample_loop over the respaced process d, guidance as in docs/design.md §3."""
    n, C = x.shape[0], x.shape[1]
    dev = x.device
    for i in reversed(range(d.T)):
        t = torch.full((n,), float(d.timestep_map[i]), device=dev)  # original timestep
        with ac if ac is not None else contextlib.nullcontext():
            out = model.forward_with_cfg(x, t, y, w) if w != 1.0 else model(x, t, y)
        out = out.float()  # (bf16 under autocast) the sampler's update in fp32
        eps = out[:, :C]
        px0 = extract(d.sqrt_recip_alphas_cumprod, i, n, dev) * x - \
            extract(d.sqrt_recipm1_alphas_cumprod, i, n, dev) * eps
        if clip:
            px0 = px0.clamp(-1, 1)
        if kind == "ddim":
            e2 = (extract(d.sqrt_recip_alphas_cumprod, i, n, dev) * x - px0) / \
                extract(d.sqrt_recipm1_alphas_cumprod, i, n, dev)
            ab = extract(d.alphas_cumprod, i, n, dev)
            abp = extract(d.alphas_cumprod_prev, i, n, dev)
            sigma = eta * torch.sqrt((1 - abp) / (1 - ab)) * torch.sqrt(1 - ab / abp)
            x = px0 * torch.sqrt(abp) + torch.sqrt(1 - abp - sigma ** 2) * e2
            if i > 0 and eta > 0:
                x = x + sigma * torch.randn_like(x)
        else:
            x = extract(d.posterior_mean_coef1, i, n, dev) * px0 + extract(d.posterior_mean_coef2, i, n, dev) * x
            if i > 0:
                if out.shape[1] == 2 * C:  # learned range
                    frac = (out[:, C:] + 1) / 2
                    lv = frac * float(d.log_betas[i]) + (1 - frac) * float(d.posterior_log_variance_clipped[i])
                else:
                    lv = extract(d.posterior_log_variance_clipped, i, n, dev)
                x = x + torch.exp(0.5 * lv) * torch.randn_like(x)
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    btt.add_model_args(p, sampling=True)
    p.add_argument("--n", type=int, default=16, help="images per run")
    p.add_argument("--steps", type=int, default=10, help="sampling steps")
    p.add_argument("--sampler", default="ddim", choices=["ddpm", "ddim"])
    p.add_argument("--cfg-scale", type=float, default=4.0, help="guidance scale of the guided run")
    a = p.parse_args()
    if a.n < 1 or a.steps < 1:
        sys.exit("error: --n and --steps must be positive")
    dev = btt.setup(a)
    kw = btt.model_config(a)
    torch.manual_seed(0)
    model = btt.build_model(a, kw).to(dev).eval()
    if a.precision == "int8":
        if a.device != "cpu":
            sys.exit("error: --precision int8: PyTorch's dynamic quantisation runs on the CPU only")
        # the transformer blocks' linears (attention, MLP, adaLN), as mala's int8 covers the blocks;
        # the embedders and final layer stay fp32 (the reference's timestep embedder reads its weight's dtype)
        model.blocks = torch.ao.quantization.quantize_dynamic(model.blocks, {torch.nn.Linear}, dtype=torch.qint8)
    btt.compile_forward(model, a)
    base = ref_diffusion.Diffusion(ref_diffusion.named_betas("linear", 1000))
    d = ref_diffusion.respaced(base, a.steps)
    rates = []
    with torch.inference_mode():
        try:  # warm-up, untimed: one step of each kind (and with --compile, the one that compiles its graph)
            for w in (1.0, a.cfg_scale):
                x, y = btt.random_batch(a.n, a.channels, a.image_size, a.classes, 2, dev)
                sample_loop(model, ref_diffusion.respaced(base, 1), x, y, w, a.sampler, ac=btt.autocast(a, dev))
        except RuntimeError as e:
            if a.precision != "bf16":
                raise
            btt.autocast_failed(a, "sample", e)
        for w in (1.0, a.cfg_scale):
            x, y = btt.random_batch(a.n, a.channels, a.image_size, a.classes, 2, dev)
            btt.sync(dev)
            t0 = time.perf_counter()
            sample_loop(model, d, x, y, w, a.sampler, ac=btt.autocast(a, dev))
            btt.sync(dev)
            rates.append(a.n / (time.perf_counter() - t0))
    print(json.dumps({
        "bench": "sample", "impl": btt.impl(a), "torch": torch.__version__, "backbone": a.backbone,
        "model": a.model, "attn": btt.mixer(a), "device": a.device, "precision": btt.precision_name(a),
        "threads": torch.get_num_threads(), "sampler": a.sampler,
        **({"quantized_engine": torch.backends.quantized.engine} if a.precision == "int8" else {}),
        "steps": a.steps, "n": a.n, "image_size": a.image_size, "channels": a.channels,
        "img_per_s": round(rates[0], 3), "img_per_s_cfg": round(rates[1], 3), "cfg_scale": a.cfg_scale,
        "peak_rss_mb": round(btt.peak_rss_mb()),
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
