#!/usr/bin/python3
"""Checks tools/ref/ref_dic.py against the official DiC class itself, on the CPU: YuchuanTian/DiC
dic_models.py runs unchanged except for a stand-in for einops (imported, never used). The
repository is not part of this project; point the script at a copy:

    git clone https://github.com/YuchuanTian/DiC /tmp/DiC     # checked at bfa541b5e3a9
    /usr/bin/python3 tools/ref/check_dic_official.py --dic /tmp/DiC [--big]

What it checks:
  1. DiC_S(input_size=32, in_channels=4, num_classes=1000): the official state_dict names,
     shapes and order equal ref_dic.DiC's and tests/fixtures/dic_s_names.txt, 32,835,752
     parameters; the same for DiC_B (and, with --big, DiC_XL and DiC_H: 2.8 and 4.1 GB).
  2. Official initialisation, tensor by tensor on DiC-S: the same tensors are all zero / all one,
     the random ones have the same standard deviation within 3% (tensors of >= 2000 values) and
     the same bound; the official state_dict loads strictly into ref_dic.DiC.
  3. Every tests/fixtures/dic_*.safetensors loads strictly into the official class (built from
     the file's metadata); in float64 its forward and gradients reproduce the file's. The one
     change: the official timestep_embedding computes in float32, ours (like ref_dit's) in
     float64, so it is swapped for the float64 one (the same formula); the untouched official
     code is also run in float32 and compared at float32-level tolerance.
  4. Label dropout in training mode: with the same torch seed the official and the reference
     forward give the same output (one torch.rand draw, shared by all stages).
"""
import argparse
import glob
import math
import os
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ref_dic  # noqa: E402
import st_io  # noqa: E402


def import_official(path):
    ein = types.ModuleType("einops")
    ein.rearrange = None
    sys.modules.setdefault("einops", ein)
    sys.path.insert(0, path)
    import dic_models
    return dic_models


def official_model(dm, meta):
    return dm.DiC_default(depth=ref_dic.json.loads(meta["depths"]), hidden_size=int(meta["hidden"]),
                          mult_channels=ref_dic.json.loads(meta["multipliers"]),
                          skip_stride=int(meta["skip_stride"]), input_size=int(meta["image_size"]),
                          in_channels=int(meta["in_channels"]), num_classes=int(meta["num_classes"]),
                          learn_sigma={"true": True, "false": False}[meta["learn_sigma"]])


def float64_timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float64) / half)
    args = t.double()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def classify(t):
    if torch.count_nonzero(t) == 0:
        return "zero"
    if torch.all(t == 1):
        return "ones"
    return "random"


def nerr(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-6))


def run(model, arrays, dtype):
    model = model.to(dtype).eval()
    model.zero_grad(set_to_none=True)
    x = torch.from_numpy(arrays["in.x"]).to(dtype)
    t = torch.from_numpy(arrays["in.t"]).to(dtype)
    y = torch.from_numpy(arrays["in.y"]).long()
    out = model(x, t, y)
    (out * torch.from_numpy(arrays["in.dout"]).to(dtype)).sum().backward()
    e = nerr(out.float(), torch.from_numpy(arrays["out"])) if arrays["out"].any() else float(out.abs().max())
    ge = 0.0
    for k, q in model.named_parameters():
        ref = torch.from_numpy(arrays["grad." + k])
        ge = max(ge, nerr(q.grad.float(), ref) if ref.any() else float(q.grad.abs().max()))
    return e, ge


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dic", required=True, help="checkout of YuchuanTian/DiC")
    ap.add_argument("--big", action="store_true", help="also build DiC-XL and DiC-H (about 7 GB)")
    ap.add_argument("--fixtures", nargs="*", default=None)
    a = ap.parse_args()
    dm = import_official(a.dic)

    # 1. names, shapes, order, counts
    kw = dict(input_size=32, in_channels=4, num_classes=1000, learn_sigma=True)
    names = [ln.split() for ln in open(os.path.join(HERE, "..", "..", "tests/fixtures/dic_s_names.txt")) if ln[0] != "#"]
    presets = ["DiC-S", "DiC-B"] + (["DiC-XL", "DiC-H"] if a.big else [])
    for p in presets:
        torch.manual_seed(0)
        off = dm.DiC_models[p](**kw)
        ours = ref_dic.DiC.from_preset(p, **kw)
        osd, rsd = off.state_dict(), ours.state_dict()
        assert [(k, tuple(v.shape)) for k, v in osd.items()] == [(k, tuple(v.shape)) for k, v in rsd.items()], p
        total = sum(v.numel() for v in osd.values())
        assert total == ref_dic.param_count(in_channels=4, num_classes=1000, learn_sigma=True, image_size=32,
                                            **ref_dic.preset_kw(p))
        if p == "DiC-S":
            assert [(ln[0], tuple(int(d) for d in ln[1:])) for ln in names] == [(k, tuple(v.shape)) for k, v in osd.items()]
            assert total == 32835752
            s_off, s_ours = osd, rsd
        print(f"1. official {p} state_dict == ref_dic{' == dic_s_names.txt' if p == 'DiC-S' else ''}: "
              f"{len(osd)} tensors, {total} parameters")
        del off, ours, osd, rsd

    # 2. initialisation, tensor by tensor (DiC-S)
    worst = 0.0
    for k in s_off:
        co, cr = classify(s_off[k]), classify(s_ours[k])
        assert co == cr, (k, co, cr)
        if co == "random":
            o, r = s_off[k].float(), s_ours[k].float()
            if o.numel() >= 2000:
                ratio = float(o.std()) / float(r.std())
                worst = max(worst, abs(ratio - 1))
                assert abs(ratio - 1) < 0.03, (k, ratio)
                # uniform (xavier: max = sqrt 3 std) or normal (N(0, 0.02): max > 3 std), and
                # the uniform ones share their bound
                uo, ur = (float(v.abs().max()) < 1.8 * float(v.std()) for v in (o, r))
                assert uo == ur, (k, uo, ur)
                if uo:
                    assert abs(float(o.abs().max()) / float(r.abs().max()) - 1) < 0.01, k
        else:
            assert torch.equal(s_off[k], s_ours[k]), k
    m = ref_dic.DiC.from_preset("DiC-S", **kw)
    m.load_state_dict(s_off)  # strict: the official weights load into ours
    print(f"2. official init: same zero / one tensors, random std ratios within {worst:.3f}, "
          f"uniform / normal alike (uniform bounds within 1%); the official "
          f"DiC-S state_dict loads strictly into ref_dic.DiC")

    # 3. fixtures through the official class
    paths = a.fixtures if a.fixtures is not None else sorted(glob.glob(os.path.join(HERE, "..", "..", "tests/fixtures/dic_*.safetensors")))
    assert paths, "no fixtures"
    for p in paths:
        sd, meta = st_io.load_state_dict(p)
        arrays, _ = st_io.load(p)
        off = official_model(dm, meta)
        off.load_state_dict(sd)  # strict
        e32, g32 = run(off, arrays, torch.float32)  # the official code as it is
        orig = dm.TimestepEmbedder.__dict__["timestep_embedding"]  # the staticmethod object
        dm.TimestepEmbedder.timestep_embedding = staticmethod(float64_timestep_embedding)
        try:
            e, ge = run(off, arrays, torch.float64)
        finally:
            dm.TimestepEmbedder.timestep_embedding = orig
        assert e < 1e-6 and ge < 1e-5, (p, e, ge)
        assert e32 < 1e-4 and g32 < 1e-3, (p, e32, g32)
        print(f"3. {os.path.basename(p)}: strict load into the official class; float64 forward err {e:.2g}, "
              f"worst gradient err {ge:.2g}; untouched official float32: {e32:.2g}, {g32:.2g} (normalised)")

    # 4. training-mode label dropout: the same draw, shared by every stage
    spec = ref_dic.CONFIGS["t1"]["kw"]
    ours = ref_dic.DiC(**spec).double()
    ref_dic.fixture_init(ours, torch.Generator().manual_seed(5))
    off = official_model(dm, ours.metadata()).double()
    off.load_state_dict(ours.state_dict())
    dm.TimestepEmbedder.timestep_embedding = staticmethod(float64_timestep_embedding)
    ours.train()
    off.train()
    B = 64
    x = torch.randn(B, 1, 8, 8, dtype=torch.float64)
    t = torch.randint(0, 1000, (B,)).double()
    y = torch.randint(0, 3, (B,))
    with torch.no_grad():
        torch.manual_seed(11)
        o1 = off(x, t, y)
        torch.manual_seed(11)
        o2 = ours(x, t, y)
        torch.manual_seed(11)
        dropped = int((torch.rand(B) < 0.1).sum())
    assert torch.allclose(o1, o2, rtol=0, atol=1e-10) and dropped > 0
    print(f"4. training mode, {B} labels ({dropped} dropped): official == ref_dic to {float((o1 - o2).abs().max()):.2g}")
    print("official-class checks passed")


if __name__ == "__main__":
    main()
