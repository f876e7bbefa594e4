#!/usr/bin/python3
"""Writes the fixtures of PyTorch's zip checkpoint format (tests/test_torch_zip.c).

Run with Debian's python, which has torch 1.13:  /usr/bin/python3 tools/ref/make_torch_zip_fixtures.py

A tiny DiT (tools/ref/ref_dit.py with softmax attention, RoPE and LePE off: DiT's network and its
state-dict names) saved by torch.save three ways, plus strided views and hostile files:
    torchzip_sd.pt      the bare state dict (as DiT's released DiT-XL-2-256x256.pt)
    torchzip_ckpt.pt    {model, ema, opt, args}: a DiT / fast-DiT training checkpoint; ema = model + 1,
                        opt an AdamW state after one step, args an argparse.Namespace (model="DiT-T/2")
    torchzip_f16.pt     the state dict with Half storages
    torchzip_views.pt   transposed / offset views of one storage, BFloat16 and Double storages
    torchzip_ref.npz    the state dict's tensors as float32 under their names, the views' as view.<k>
    torchzip_os_system.pt   a pickle that would call os.system (must be refused, never run)
    torchzip_huge.pt        a storage that claims 2^40 elements in a 4-byte member
    torchzip_deflate.pt     torchzip_sd.pt rewritten with deflated members (refused: zip-bomb guard)
and the seeds of tests/fuzz/fuzz_torch_zip.c in tests/fuzz/seeds/torch_zip/.
"""

import argparse
import collections
import io
import os
import pickle
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_dit import DiT  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")


class Hostile:
    def __reduce__(self):
        return (os.system, ("echo pwned > /tmp/mala_torchzip_pwned",))


class FakeStorage:
    pass


class HugeTensor:
    def __init__(self, st):
        self.st = st

    def __reduce__(self):
        n = 1 << 40
        return (torch._utils._rebuild_tensor_v2, (self.st, 0, (n,), (1,), False, collections.OrderedDict()))


def huge_file(path):
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=2)
    st = FakeStorage()
    p.persistent_id = lambda o: ("storage", torch.FloatStorage, "0", "cpu", 1 << 40) if o is st else None
    p.dump(collections.OrderedDict(w=HugeTensor(st)))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", b"\0\0\0\0")
        z.writestr("archive/version", "3\n")


def main():
    torch.manual_seed(51)
    net = DiT(input_size=8, patch_size=2, in_channels=4, hidden_size=16, depth=1, num_heads=2,
              num_classes=4, learn_sigma=True, attn="softmax", rope=False, lepe=0, gate=False)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn_like(p) * 0.05)
    sd = collections.OrderedDict((k, v.detach().clone()) for k, v in net.state_dict().items())
    ref = {k: v.numpy().copy() for k, v in sd.items()}
    torch.save(sd, os.path.join(OUT, "torchzip_sd.pt"))

    ema = collections.OrderedDict((k, v + 1) for k, v in sd.items())
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    net(torch.randn(1, 4, 8, 8), torch.tensor([3.0]), torch.tensor([1])).square().mean().backward()
    opt.step()
    args = argparse.Namespace(model="DiT-T/2", image_size=64, num_classes=4, results_dir="results")
    torch.save({"model": sd, "ema": ema, "opt": opt.state_dict(), "args": args},
               os.path.join(OUT, "torchzip_ckpt.pt"))

    f16 = collections.OrderedDict((k, v.half()) for k, v in sd.items())
    torch.save(f16, os.path.join(OUT, "torchzip_f16.pt"))

    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7
    views = collections.OrderedDict()
    views["t"] = base.t()                    # strides (1, 6)
    views["s"] = base[1:, 2:]                # offset 8, strides (6, 1)
    views["e"] = base[::2, ::3]              # strides (12, 3)
    views["b"] = (base * 3).bfloat16()
    views["d"] = base.double()[2]
    for k, v in views.items():
        ref["view." + k] = np.ascontiguousarray(v.float().numpy())
    torch.save(views, os.path.join(OUT, "torchzip_views.pt"))
    np.savez(os.path.join(OUT, "torchzip_ref.npz"), **ref)

    torch.save({"x": Hostile()}, os.path.join(OUT, "torchzip_os_system.pt"))
    huge_file(os.path.join(OUT, "torchzip_huge.pt"))
    with zipfile.ZipFile(os.path.join(OUT, "torchzip_sd.pt")) as zin, \
            zipfile.ZipFile(os.path.join(OUT, "torchzip_deflate.pt"), "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))
    assert not os.path.exists("/tmp/mala_torchzip_pwned")

    # libFuzzer seeds (tests/fuzz/fuzz_torch_zip.c): a tiny training checkpoint and small files
    seeds = os.path.join(OUT, "..", "fuzz", "seeds", "torch_zip")
    os.makedirs(seeds, exist_ok=True)
    w = torch.nn.Linear(2, 2)
    tiny_opt = torch.optim.AdamW(w.parameters())
    w(torch.ones(1, 2)).sum().backward()
    tiny_opt.step()
    torch.save({"model": w.state_dict(), "ema": w.state_dict(), "opt": tiny_opt.state_dict(),
                "args": argparse.Namespace(model="DiT-S/2")}, os.path.join(seeds, "tiny_ckpt.pt"))
    torch.save(collections.OrderedDict(h=torch.ones(3).half(), b=torch.ones(2, 2).bfloat16().t()),
               os.path.join(seeds, "half_bf16.pt"))
    for name in ("torchzip_views.pt", "torchzip_os_system.pt", "torchzip_huge.pt"):
        with open(os.path.join(OUT, name), "rb") as f, open(os.path.join(seeds, name[9:]), "wb") as g:
            g.write(f.read())


if __name__ == "__main__":
    main()
