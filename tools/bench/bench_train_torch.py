#!/usr/bin/python3
"""PyTorch eager peer of `mala bench train`: the same model, flags, step and JSON line.

    /usr/bin/python3 tools/bench/bench_train_torch.py --model DiT-S/2 --attn mala --batch 32 --steps 2 \\
        --threads 2 --image-size 32 --channels 1
    /usr/bin/python3 tools/bench/bench_train_torch.py --backbone dig --model DiG-S/2 --batch 32 --steps 2
    /usr/bin/python3 tools/bench/bench_train_torch.py --backbone dic --model DiC-S --batch 32 --steps 2

One training step is DiT's train.py step on a fixed random batch (x uniform in [-1, 1], random
labels, seed 1), as trainer_step does it in C:
  label dropout to the null class (p 0.1, in the module's train mode), t ~ U{0..999},
  x_t = q_sample(x, t, noise), forward, ADM loss (MSE + VB with learned range, eps half
  detached in VB; tools/ref_diffusion.training_losses), backward, global grad norm,
  AdamW(lr 1e-4, weight decay 0, betas 0.9/0.999, eps 1e-8), EMA update (decay 0.9999, DiT's
  update_ema loop).
The model is tools/ref_dit.DiT with docs/design.md §2's DiT initialisation (adaLN-Zero), configured from
the same presets and defaults as the C program (cli/model_opts.c, model/dit_config.c); with
--backbone dig it is tools/ref_dig.DiG (official DiG initialisation, chunked GLA in plain torch,
presets ref_dig.PRESETS; --attn, --rope, --lepe and --gate do not apply); with --backbone dic it
is tools/ref_dic.DiC (official DiC initialisation, presets ref_dic.PRESETS: DiC-{T,S,B,XL,H},
multipliers [1,2,4,2,1], skip stride 3; the DiT attention flags do not apply).
--precision bf16 runs the forward under torch.autocast(device, torch.bfloat16) (the loss, backward's
fp32 accumulation into fp32 weights, AdamW and EMA as autocast leaves them); where autocast raises on a
reference module it prints "autocast-bf16 failed: ..." on stderr and a JSON line with "error", exit 0.
One warm-up step (with --compile, the one that compiles), then --steps timed steps. Like ./mala (cli/main.c), OMP_WAIT_POLICY defaults to
passive unless the environment sets it. Prints one JSON line.
"""
import argparse
import contextlib
import copy
import json
import os
import resource
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before torch loads libgomp, as ./mala does

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))  # the references
import ref_diffusion  # noqa: E402  (sets the default dtype to float64)
import ref_dic  # noqa: E402
import ref_dig  # noqa: E402
import ref_dit  # noqa: E402

torch.set_default_dtype(torch.float32)

# model/dit_config.c PRESETS: name -> (depth, hidden, heads)
PRESETS = {"T": (4, 128, 4), "XS": (6, 256, 4), "S": (12, 384, 6), "B": (12, 768, 12),
           "L": (24, 1024, 16), "XL": (28, 1152, 16)}
DIT_FREQ_DIM = 256


def parse_bool(s):
    v = s.lower()
    if v in ("true", "on", "1", "yes"):
        return True
    if v in ("false", "off", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {s!r}")


def add_model_args(p, sampling=False):
    """cli/model_opts.c: --model, --attn, --rope, --lepe, --gate, --image-size, --channels,
    --classes, --learn-sigma with the C defaults. sampling: --precision also takes int8."""
    p.add_argument("--backbone", default="dit", choices=["dit", "dig", "dic"])
    p.add_argument("--model", default=None,
                   help="DiT-{T,XS,S,B,L,XL}/{2,4,8}, DiG-... or DiC-{T,S,B,XL,H}; default the backbone's S(/2)")
    p.add_argument("--attn", default="mala", choices=["mala", "softmax", "linear"])
    p.add_argument("--rope", type=int, default=-1, help="0|1 (-1: on for mala/linear)")
    p.add_argument("--lepe", type=int, default=-1, help="LePE kernel, 0 = off (-1: 5 for mala/linear)")
    p.add_argument("--gate", type=int, default=-1, help="0|1 (-1: off)")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--learn-sigma", type=parse_bool, default=True)
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0 = all cores)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="tf32", choices=["tf32", "fp32", "bf16"] + (["int8"] if sampling else []),
                   help="CUDA matrix products and convolutions on TF32 tensor cores (mala's default) or in fp32; "
                        "bf16: the forward under torch.autocast(device, torch.bfloat16) (CPU and CUDA)" +
                        ("; int8 (CPU): every nn.Linear through torch.ao.quantization.quantize_dynamic (qint8 "
                         "weights, activations quantised per call), the rest fp32" if sampling else ""))
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model's forward (the first, untimed run compiles it)")


def model_config(a):
    """Returns the DiT kwargs the C program would build from the same flags (DiG, DiC: the kwargs
    of their reference modules, see build_model)."""
    if a.model is None:
        a.model = {"dig": "DiG-S/2", "dic": "DiC-S"}.get(a.backbone, "DiT-S/2")
    if a.backbone == "dic":
        s = a.model[4:] if a.model.startswith("DiC-") else a.model
        if a.model.startswith(("DiT-", "DiG-")) or s not in ref_dic.PRESETS:
            sys.exit(f"error: --model {a.model}: not a DiC preset (expected DiC-{{T,S,B,XL,H}})")
        hidden, depths = ref_dic.PRESETS[s]
        return dict(hidden_size=hidden, depths=depths, multipliers=ref_dic.DEFAULT_MULTIPLIERS,
                    skip_stride=ref_dic.DEFAULT_SKIP_STRIDE, input_size=a.image_size,
                    in_channels=a.channels, num_classes=a.classes, learn_sigma=a.learn_sigma)
    if a.model.startswith("DiC-"):
        sys.exit(f"error: --model {a.model}: a DiC preset needs --backbone dic")
    if a.backbone == "dig":
        if a.model.startswith("DiT-"):
            sys.exit(f"error: --model {a.model}: not a DiG preset (--backbone dig)")
        s = a.model[4:] if a.model.startswith("DiG-") else a.model
        name, _, patch = s.partition("/")
        if name not in ref_dig.PRESETS or patch not in ("", "2", "4", "8"):
            sys.exit(f"error: --model {a.model}: unknown preset (expected DiG-{{T,XS,S,B,L,XL}}/{{2,4,8}})")
        depth, hidden, heads = ref_dig.PRESETS[name]
        return dict(depth=depth, hidden_size=hidden, num_heads=heads, patch_size=int(patch or 2),
                    input_size=a.image_size, in_channels=a.channels, num_classes=a.classes,
                    learn_sigma=a.learn_sigma)
    if a.model.startswith("DiG-"):
        sys.exit(f"error: --model {a.model}: a DiG preset needs --backbone dig")
    s = a.model[4:] if a.model.startswith("DiT-") else a.model
    name, _, patch = s.partition("/")
    if name not in PRESETS:
        sys.exit(f"error: --model {a.model}: unknown preset (expected DiT-{{T,XS,S,B,L,XL}}/{{2,4,8}})")
    if patch and patch not in ("2", "4", "8"):
        sys.exit(f"error: --model {a.model}: patch size must be 2, 4 or 8")
    depth, hidden, heads = PRESETS[name]
    soft = a.attn == "softmax"
    rope = (not soft) if a.rope < 0 else a.rope != 0
    lepe = (0 if soft else 5) if a.lepe < 0 else a.lepe
    gate = False if a.gate < 0 else a.gate != 0
    return dict(depth=depth, hidden_size=hidden, num_heads=heads, patch_size=int(patch or 2),
                input_size=a.image_size, in_channels=a.channels, num_classes=a.classes,
                learn_sigma=a.learn_sigma, attn=a.attn, rope=rope, lepe=lepe, gate=gate)


def dit_flops_per_image(kw):
    """model/dit_config.c dit_flops_per_image (forward multiply-adds x 2)."""
    H, p = kw["hidden_size"], kw["patch_size"]
    g = kw["input_size"] // p
    T = g * g
    d = H / kw["num_heads"]
    cout = kw["in_channels"] * (2 if kw["learn_sigma"] else 1)
    per_block = T * (3 * H * H + H * H + 8 * H * H) + 6 * H * H
    if kw["gate"]:
        per_block += T * H * H
    per_block += 2 * T * T * H if kw["attn"] == "softmax" else 2 * T * d * H
    if kw["lepe"]:
        per_block += T * H * kw["lepe"] ** 2
    mac = (kw["depth"] * per_block + T * p * p * kw["in_channels"] * H + (DIT_FREQ_DIM * H + H * H)
           + 2 * H * H + T * H * p * p * cout)
    return 2.0 * mac


def build_model(a, kw):
    return {"dig": ref_dig.DiG, "dic": ref_dic.DiC}.get(a.backbone, ref_dit.DiT)(**kw)


def flops_per_image(a, kw):
    if a.backbone == "dic":
        return ref_dic.flops_per_image(kw["hidden_size"], kw["depths"], kw["multipliers"], kw["skip_stride"],
                                       kw["in_channels"], kw["learn_sigma"], kw["input_size"])
    if a.backbone == "dig":
        return ref_dig.flops_per_image(kw["depth"], kw["hidden_size"], kw["num_heads"], kw["patch_size"],
                                       kw["in_channels"], kw["learn_sigma"], kw["input_size"])
    return dit_flops_per_image(kw)


def mixer(a):
    return {"dig": "gla", "dic": "conv"}.get(a.backbone, a.attn)


def setup(a):
    n = a.threads if a.threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(n)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda: torch has no CUDA device here; use --device cpu")
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    if a.compile and not hasattr(torch, "compile"):
        sys.exit(f"error: --compile needs PyTorch 2 (this is torch {torch.__version__})")
    return torch.device(a.device)


def autocast(a, dev):
    """--precision bf16: PyTorch's mixed precision (autocast runs linear layers, matmuls and convolutions on
    bf16 inputs; weights, optimiser and the rest stay fp32), as a PyTorch user turns it on."""
    if a.precision == "bf16":
        return torch.autocast(dev.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def precision_name(a):
    return a.precision if a.device == "cuda" or a.precision in ("bf16", "int8") else "fp32"


def autocast_failed(a, bench, e):
    """autocast raising on a reference module (PyTorch 1.13's CPU autocast on DiC): one clear line on stderr
    and the JSON line with the error, so that a table says so instead of showing a number."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    print(f"autocast-bf16 failed: {a.backbone} {a.model} on {a.device} (torch {torch.__version__}): {msg}",
          file=sys.stderr)
    print(json.dumps({"bench": bench, "impl": impl(a), "torch": torch.__version__, "backbone": a.backbone,
                      "model": a.model, "device": a.device, "precision": "bf16", "error": "autocast: " + msg},
                     separators=(",", ":")))
    sys.exit(0)


def compile_forward(model, a):
    """--compile: the forward pass through torch.compile (one static graph per batch size), set on
    the instance so that forward_with_cfg and the training step call it; the module, its parameter
    names and the EMA copy are unchanged."""
    if a.compile:
        model.forward = torch.compile(model.forward, dynamic=False)


def impl(a):
    return "torch-compile" if a.compile else "torch-eager"


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def random_batch(B, C, S, K, seed, dev):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(B, C, S, S, generator=g) * 2 - 1
    y = torch.randint(0, K, (B,), generator=g)
    return x.to(dev), y.to(dev)


@torch.no_grad()
def update_ema(ema, model, decay=0.9999):
    """DiT train.py update_ema."""
    ema_params = dict(ema.named_parameters())
    for name, param in model.named_parameters():
        ema_params[name].mul_(decay).add_(param.data, alpha=1 - decay)


def train_step(model, ema, opt, diff, x, y, learned, ac=None):
    B = x.shape[0]
    t = torch.randint(0, diff.T, (B,), device=x.device)
    noise = torch.randn_like(x)
    tc = t.cpu()
    xt = ref_diffusion.ext(diff.sqrt_alphas_cumprod, tc, x.dtype).to(x.device) * x + \
        ref_diffusion.ext(diff.sqrt_one_minus_alphas_cumprod, tc, x.dtype).to(x.device) * noise
    with ac if ac is not None else contextlib.nullcontext():
        out = model(xt, t, y)  # label dropout happens inside (train mode), as in DiT
    out = out.float()  # (bf16 under autocast) the loss in fp32, as autocast's recipe and mala do
    if x.device.type == "cpu":
        terms = ref_diffusion.training_losses(diff, out, x, noise, tc, xt, x.dtype, learned)
    else:  # ref_diffusion gathers tables on the CPU
        terms = ref_diffusion.training_losses(diff, out.cpu(), x.cpu(), noise.cpu(), tc, xt.cpu(), x.dtype,
                                              learned)
    loss = terms["loss"].mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]))
    opt.step()
    update_ema(ema, model)
    return float(loss), float(grad_norm)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_model_args(p)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=5, help="timed steps (after one warm-up step)")
    a = p.parse_args()
    if a.batch < 1 or a.steps < 1:
        sys.exit("error: --batch and --steps must be positive")
    dev = setup(a)
    kw = model_config(a)
    torch.manual_seed(0)
    model = build_model(a, kw).to(dev)  # DiT: docs/design.md §2 init (adaLN-Zero); DiG, DiC: official init
    ema = copy.deepcopy(model).requires_grad_(False)
    compile_forward(model, a)
    model.train()
    ema.eval()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0)
    diff = ref_diffusion.Diffusion(ref_diffusion.named_betas("linear", 1000))
    x, y = random_batch(a.batch, a.channels, a.image_size, a.classes, 1, dev)

    try:
        train_step(model, ema, opt, diff, x, y, a.learn_sigma, autocast(a, dev))  # warm-up
    except RuntimeError as e:
        if a.precision != "bf16":
            raise
        autocast_failed(a, "train", e)
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss, gn = train_step(model, ema, opt, diff, x, y, a.learn_sigma, autocast(a, dev))
    sync(dev)
    dt = (time.perf_counter() - t0) / a.steps
    fl = 3.0 * flops_per_image(a, kw)
    params = sum(q.numel() for q in model.parameters() if q.requires_grad)
    print(json.dumps({
        "bench": "train", "impl": impl(a), "torch": torch.__version__, "backbone": a.backbone,
        "model": a.model, "attn": mixer(a), "device": a.device, "precision": precision_name(a),
        "threads": torch.get_num_threads(), "batch": a.batch,
        "image_size": a.image_size, "channels": a.channels, "params": params,
        "img_per_s": round(a.batch / dt, 3), "s_per_step": round(dt, 4),
        "gflop_per_img": round(fl / 1e9, 2), "gflops": round(fl * a.batch / dt / 1e9, 1),
        "loss": round(loss, 5), "grad_norm": round(gn, 5), "peak_rss_mb": round(peak_rss_mb()),
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
