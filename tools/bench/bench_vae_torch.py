#!/usr/bin/python3
"""PyTorch eager peer of `mala bench vae` (cli/cmd_vae.c: cmd_bench_vae): tools/ref/ref_vae.py's
AutoencoderKL (diffusers' architecture, sd-vae-ft-ema's config, random weights; or --tiny for the
test config) timed on encode (posterior mean and clamped logvar) and decode of scaled latents, on
the same batch, image size and thread count, each after an untimed warm-up run, under
torch.inference_mode(), on --device cpu or cuda (tools/gpu/gpu_check.sh); --precision bf16 runs them
under torch.autocast(device, torch.bfloat16) (where autocast raises: "autocast-bf16 failed: ..." on
stderr and a JSON line with "error"), tf32 allows TF32 tensor cores on CUDA (fp32 on the CPU).
Prints one JSON line.

    /usr/bin/python3 tools/bench/bench_vae_torch.py --batch 4 --size 256 --threads 2
"""
import argparse
import contextlib
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))  # the references
from ref_vae import SCALE, AutoencoderKL, random_init  # noqa: E402


def timed(fn, reps, sync):
    fn()  # warm-up
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--size", "--image-size", dest="size", type=int, default=256)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="0 = torch's default")
    ap.add_argument("--tiny", action="store_true", help="the test config (channels 4 8 16 16, 2 groups)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"],
                    help="bf16: under torch.autocast; tf32: TF32 tensor cores for products and convolutions (CUDA)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda: torch has no CUDA device here; use --device cpu")
    if args.precision == "tf32" and args.device == "cpu":
        args.precision = "fp32"  # as mala's CPU backend: tf32 names the CUDA tensor-core mode only
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    ac = (lambda: torch.autocast(args.device, dtype=torch.bfloat16)) if args.precision == "bf16" else contextlib.nullcontext
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.tiny:
        model = AutoencoderKL(block_out_channels=(4, 8, 16, 16), norm_num_groups=2)
    else:
        model = AutoencoderKL()
    random_init(model, 0)
    model.eval().to(dev)
    f = 2 ** (len(model.config["block_out_channels"]) - 1)
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(args.batch, 3, args.size, args.size, generator=g) * 2 - 1).to(dev)
    z = torch.randn(args.batch, model.config["latent_channels"], args.size // f, args.size // f, generator=g).to(dev)
    with torch.inference_mode(), ac():
        try:
            te = timed(lambda: model.encode(x), args.reps, sync)
            td = timed(lambda: model.decode(z / SCALE), args.reps, sync)
        except RuntimeError as e:
            if args.precision != "bf16":
                raise
            msg = str(e).strip().splitlines()[0]
            print(f"autocast-bf16 failed: the VAE (torch {torch.__version__}): {msg}", file=sys.stderr)
            print(json.dumps({"bench": "vae_torch", "precision": "bf16", "error": "autocast: " + msg,
                              "torch": torch.__version__}))
            return
    print(json.dumps({"bench": "vae_torch", "device": args.device, "precision": args.precision,
                      "threads": torch.get_num_threads(),
                      "batch": args.batch,
                      "image_size": args.size, "encode_img_per_s": round(args.batch / te, 4),
                      "decode_img_per_s": round(args.batch / td, 4), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
