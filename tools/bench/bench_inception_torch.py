#!/usr/bin/python3
"""PyTorch eager peer of `mala bench inception` (eval_cli.c: cmd_bench_inception): the FID Inception-v3 forward (bilinear resize to
299, 2x-1, the network with pytorch-fid's FID blocks, pool3 and the 1008 logits) on the same batch
shape and thread count, after --warmup untimed runs, under torch.inference_mode(); --precision bf16
runs it under torch.autocast("cpu", torch.bfloat16) (where autocast raises: "autocast-bf16 failed: ..."
on stderr and a JSON line with "error"). Prints one JSON line.

    /usr/bin/python3 tools/bench/bench_inception_torch.py --batch 16 --threads 2 --size 32
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
from make_inception_fixtures import fid_forward, fid_inception_v3  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--size", type=int, default=32, help="input S x S, resized to 299 inside")
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="0 = torch's default")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16: under torch.autocast")
    args = ap.parse_args()
    ac = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.precision == "bf16" else contextlib.nullcontext
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = fid_inception_v3()  # random init: speed does not depend on the values
    g = torch.Generator().manual_seed(0)
    x = torch.rand(args.batch, args.channels, args.size, args.size, generator=g)
    if args.channels == 1:
        x = x.repeat(1, 3, 1, 1)
    with torch.inference_mode():
        try:
            for _ in range(args.warmup):
                with ac():
                    fid_forward(model, x)
        except RuntimeError as e:
            if args.precision != "bf16":
                raise
            msg = str(e).strip().splitlines()[0]
            print(f"autocast-bf16 failed: the FID Inception (torch {torch.__version__}): {msg}", file=sys.stderr)
            print(json.dumps({"bench": "inception", "impl": "torch-eager", "torch": torch.__version__,
                              "precision": "bf16", "error": "autocast: " + msg}))
            return
        times = []
        for _ in range(args.iters):
            t0 = time.perf_counter()
            with ac():
                fid_forward(model, x)
            times.append(time.perf_counter() - t0)
    total = sum(times)
    print(json.dumps({
        "bench": "inception", "impl": "torch-eager", "torch": torch.__version__, "precision": args.precision,
        "batch": args.batch,
        "threads": torch.get_num_threads(), "input": "%dx%dx%d" % (args.channels, args.size, args.size),
        "iters": args.iters, "img_per_s": round(args.batch * args.iters / total, 3),
        "best_img_per_s": round(args.batch / min(times), 3),
    }))


if __name__ == "__main__":
    main()
