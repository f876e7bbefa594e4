#!/usr/bin/python3
"""Checks tools/ref/ref_dig.py against the official DiG class itself, on the CPU, without fla's Triton
kernels: the official Python (hustvl/DiG models_dig.py, module_dig.py, models_dit.py) runs with
plain-torch stand-ins for the libraries it imports, and fla's own pure-torch pieces at DiG's
pinned commit (configuration_gla.py, ops/gla/naive.py, the step-by-step recurrence) are loaded
from an fla checkout. Neither repository is part of this project; point the script at copies:

    git clone https://github.com/hustvl/DiG /tmp/DiG
    git clone https://github.com/fla-org/flash-linear-attention /tmp/fla
    git -C /tmp/fla checkout 36743f3f14e47f23c1ad45cf5de727dbacb5600e
    /usr/bin/python3 tools/ref/check_dig_official.py --dig /tmp/DiG --fla /tmp/fla

What it checks:
  1. DiG_S_2_bid_layer_dwconv_qdir(input_size=32, in_channels=4, num_classes=1000): the official
     state_dict names, shapes and order equal ref_dig.DiG's and tests/fixtures/dig_s2_names.txt.
  2. Official initialisation, tensor by tensor on that model: the same tensors are all zero / all
     one / identity taps, and the random ones have the same standard deviation within 3%.
  3. Every tests/fixtures/dig_*.safetensors loads strictly into the official class (built from
     the file's metadata) and the official forward and gradients reproduce the file's (fla's
     naive recurrence computes in float32, hence the float32-level tolerances).
The stand-ins: einops.rearrange, timm's PatchEmbed (a strided conv), transformers' config base
class and empty placeholders, fla's FusedRMSNormSwishGate / RMSNorm / swiglu_linear written out,
and fused_chunk_gla = chunk_gla = fla's naive_recurrent_gla.
"""
import argparse
import glob
import importlib.util
import math
import os
import sys
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ref_dig  # noqa: E402
import st_io  # noqa: E402


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, m)
    return m


def _load_file(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, m)
    return m


def rearrange(x, pattern, **sizes):
    """einops.rearrange for patterns with at most one parenthesised group per side."""
    def parse(side):
        out, group = [], None
        for tok in side.replace("(", " ( ").replace(")", " ) ").split():
            if tok == "(":
                group = []
            elif tok == ")":
                out.append(group)
                group = None
            elif group is not None:
                group.append(tok)
            else:
                out.append(tok)
        return out

    lhs, rhs = (parse(s) for s in pattern.split("->"))
    dims, flat = dict(sizes), []
    for ax, n in zip(lhs, x.shape):
        if isinstance(ax, list):
            known = math.prod(dims[a] for a in ax if a in dims)
            for a in ax:
                dims.setdefault(a, n // known)
            flat += ax
        else:
            dims[ax] = n
            flat.append(ax)
    x = x.reshape([dims[a] for a in flat])
    order = [a for ax in rhs for a in (ax if isinstance(ax, list) else [ax])]
    x = x.permute([flat.index(a) for a in order])
    return x.reshape([math.prod(dims[a] for a in ax) if isinstance(ax, list) else dims[ax] for ax in rhs])


class PatchEmbed(nn.Module):  # timm: Conv2d(in, D, p, stride p), flatten to (B, N, D)
    def __init__(self, img_size, patch_size, in_chans, embed_dim, bias=True):
        super().__init__()
        self.patch_size = (patch_size, patch_size)
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size, bias=bias)
        self.norm = nn.Identity()

    def forward(self, x):
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class PretrainedConfig:
    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class RMSNorm(nn.Module):  # fla.modules.RMSNorm (built, then deleted by SeqDiGBlock)
    def __init__(self, hidden_size, elementwise_affine=True, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))


class FusedRMSNormSwishGate(nn.Module):  # fla.modules.fused_norm_gate at the pin
    def __init__(self, hidden_size, elementwise_affine=True, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size)) if elementwise_affine else None
        self.register_parameter("bias", None)

    def forward(self, x, o, residual=None, prenorm=False, residual_in_fp32=False):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.weight is not None:
            y = y * self.weight
        return y * o * torch.sigmoid(o)


def install_stubs(fla_dir):
    class Placeholder(nn.Module):
        def __init__(self, *a, **k):
            super().__init__()

    _module("einops", rearrange=rearrange)
    _module("timm")
    _module("timm.models")
    _module("timm.models.vision_transformer", PatchEmbed=PatchEmbed, Attention=Placeholder, Mlp=Placeholder)
    _module("transformers")
    _module("transformers.configuration_utils", PretrainedConfig=PretrainedConfig)
    _module("transformers.activations", ACT2FN={"swish": F.silu, "silu": F.silu})
    _module("transformers.cache_utils", Cache=object, DynamicCache=object)
    _module("transformers.modeling_outputs", BaseModelOutputWithPast=dict, CausalLMOutputWithPast=dict)
    _module("transformers.modeling_utils", PreTrainedModel=nn.Module)
    import logging
    _module("transformers.utils", logging=types.SimpleNamespace(get_logger=logging.getLogger))
    _module("fla")
    _module("fla.models")
    _module("fla.models.gla")
    cfg = _load_file("fla.models.gla.configuration_gla", os.path.join(fla_dir, "fla/models/gla/configuration_gla.py"))
    sys.modules["fla.models"].GLAConfig = cfg.GLAConfig
    _module("fla.modules", FusedCrossEntropyLoss=Placeholder, RMSNorm=RMSNorm, ShortConvolution=Placeholder,
            FusedRMSNormSwishGate=FusedRMSNormSwishGate)
    _module("fla.modules.activations", ACT2FN={"swish": F.silu, "silu": F.silu},
            swiglu_linear=lambda x, y, w, b: F.linear(F.silu(x) * y, w, b))
    _module("fla.ops")
    gla = _module("fla.ops.gla")
    _module("fla.ops.gla.recurrent_fuse", fused_recurrent_gla=None)
    naive = _load_file("fla.ops.gla.naive", os.path.join(fla_dir, "fla/ops/gla/naive.py"))

    def via_naive(q, k, v, g, scale=-1, initial_state=None, output_final_state=False):
        assert scale == -1, "DiG uses the default scale dk^-1/2"
        return naive.naive_recurrent_gla(q, k, v, g, initial_state, output_final_state)

    gla.chunk_gla = gla.fused_chunk_gla = gla.fused_recurrent_gla = via_naive


def official_model(models_dig, meta):
    """The official constructor the file's configuration corresponds to."""
    return models_dig.DiG(depth=int(meta["depth"]), hidden_size=int(meta["hidden"]),
                          patch_size=int(meta["patch"]), num_heads=int(meta["heads"]),
                          bid_mode="layer", if_dw_conv=True, if_quad_dir=True,
                          input_size=int(meta["image_size"]), in_channels=int(meta["in_channels"]),
                          num_classes=int(meta["num_classes"]),
                          learn_sigma={"true": True, "false": False}[meta["learn_sigma"]])


def classify(t):
    if torch.count_nonzero(t) == 0:
        return "zero"
    if torch.all(t == 1):
        return "ones"
    if t.dim() == 4 and t.shape[-1] == 3 and torch.count_nonzero(t) == t.shape[0] and torch.all(t[:, :, 1, 1] == 1):
        return "identity-tap"
    return "random"


def nerr(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-6))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dig", required=True, help="checkout of hustvl/DiG")
    ap.add_argument("--fla", required=True, help="checkout of flash-linear-attention at 36743f3f")
    ap.add_argument("--fixtures", nargs="*", default=None)
    a = ap.parse_args()
    install_stubs(a.fla)
    sys.path.insert(0, a.dig)
    import models_dig

    # 1. names, shapes, order of the official DiG-S/2
    torch.manual_seed(0)
    off = models_dig.DiG_S_2_bid_layer_dwconv_qdir(input_size=32, in_channels=4, num_classes=1000)
    ours = ref_dig.DiG.from_preset("DiG-S/2", input_size=32, in_channels=4, num_classes=1000)
    osd, rsd = off.state_dict(), ours.state_dict()
    assert [(k, tuple(v.shape)) for k, v in osd.items()] == [(k, tuple(v.shape)) for k, v in rsd.items()]
    lines = [ln.split() for ln in open(os.path.join(HERE, "..", "..", "tests/fixtures/dig_s2_names.txt")) if ln[0] != "#"]
    assert [(ln[0], tuple(int(d) for d in ln[1:])) for ln in lines] == [(k, tuple(v.shape)) for k, v in osd.items()]
    total = sum(v.numel() for v in osd.values())
    print(f"1. official DiG-S/2 state_dict == ref_dig == dig_s2_names.txt: {len(osd)} tensors, {total} parameters")

    # 2. initialisation, tensor by tensor
    worst = 0.0
    assert torch.allclose(osd["pos_embed"], rsd["pos_embed"], atol=1e-6)
    for k in osd:
        if k == "pos_embed":
            continue
        co, cr = classify(osd[k]), classify(rsd[k])
        assert co == cr, (k, co, cr)
        if co == "random":
            so, sr = float(osd[k].float().std()), float(rsd[k].float().std())
            worst = max(worst, abs(so / sr - 1))
            assert abs(so / sr - 1) < 0.03, (k, so, sr)
        else:
            assert torch.equal(osd[k], rsd[k]), k
    ours.load_state_dict(osd)  # strict: the official weights load into ours
    print(f"2. official init: same zero / one / identity-tap tensors, random std ratios within {worst:.3f}; "
          f"the official state_dict loads strictly into ref_dig.DiG")

    # 3. fixtures through the official class
    paths = a.fixtures if a.fixtures is not None else sorted(glob.glob(os.path.join(HERE, "..", "..", "tests/fixtures/dig_*.safetensors")))
    for p in paths:
        sd, meta = st_io.load_state_dict(p)
        arrays, _ = st_io.load(p)
        m = official_model(models_dig, meta)
        m.load_state_dict(sd)  # strict
        m = m.double().eval()
        x = torch.from_numpy(arrays["in.x"]).double()
        t = torch.from_numpy(arrays["in.t"]).double()
        y = torch.from_numpy(arrays["in.y"]).long()
        out = m(x, t, y)
        (out * torch.from_numpy(arrays["in.dout"]).double()).sum().backward()
        e = nerr(out.float(), torch.from_numpy(arrays["out"])) if arrays["out"].any() else float(out.abs().max())
        assert e < 1e-5, (p, e)
        ge = 0.0
        for k, q in m.named_parameters():
            if q.requires_grad:
                ref = torch.from_numpy(arrays["grad." + k])
                ge = max(ge, nerr(q.grad.float(), ref) if ref.any() else float(q.grad.abs().max()))
        assert ge < 1e-4, (p, ge)
        print(f"3. {os.path.basename(p)}: strict load into the official class; forward err {e:.2g}, "
              f"worst gradient err {ge:.2g} (normalised, float32 recurrence)")
    print("official-class checks passed")


if __name__ == "__main__":
    main()
