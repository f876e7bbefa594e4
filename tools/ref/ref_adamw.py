"""Reference AdamW and EMA trajectories from PyTorch for tests/test_train.c.

Writes tests/fixtures/adamw.safetensors: the initial parameters `p0`, the gradients `g.<k>` fed
at steps k = 1..5, the parameters `p.<k>` torch.optim.AdamW leaves after each step (lr 1e-3,
betas 0.9/0.999, eps 1e-8, weight decay 0.05), and the EMA `e.<k>` of the parameters with decay
0.9 (DiT's update_ema: ema = decay * ema + (1 - decay) * param, starting from p0).

Run: /usr/bin/python3 tools/ref/ref_adamw.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import st_io  # noqa: E402

torch.manual_seed(0)
n = 257
p = torch.nn.Parameter(torch.randn(n) * 0.5)
opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)
ema = p.detach().clone()
out = {"p0": p.detach().clone().numpy()}
for k in range(1, 6):
    g = torch.randn(n) * (0.1 * k)
    g[::17] = 0.0  # zero gradients exercise the pure-decay path
    p.grad = g.clone()
    opt.step()
    ema.mul_(0.9).add_(p.detach(), alpha=0.1)
    out[f"g.{k}"] = g.numpy()
    out[f"p.{k}"] = p.detach().clone().numpy()
    out[f"e.{k}"] = ema.clone().numpy()
path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "adamw.safetensors")
st_io.save(path, out, {"lr": "1e-3", "weight_decay": "0.05", "ema_decay": "0.9"})
print("wrote", os.path.normpath(path))
