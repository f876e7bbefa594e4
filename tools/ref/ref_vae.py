#!/usr/bin/python3
"""PyTorch reference for Stable Diffusion's AutoencoderKL as DiT uses it (sd-vae-ft-ema / -mse).

The diffusers package is not installed here, so this file rebuilds diffusers' AutoencoderKL in
plain torch with the same module tree (huggingface/diffusers at commit
58eb52c0803ea9af3abec60841c2a093bdf1f951: models/autoencoders/autoencoder_kl.py, vae.py
(Encoder, Decoder, DiagonalGaussianDistribution), resnet.py (ResnetBlock2D),
attention_processor.py (Attention + AttnProcessor), downsampling.py (Downsample2D),
upsampling.py (Upsample2D), unets/unet_2d_blocks.py (DownEncoderBlock2D, UpDecoderBlock2D,
UNetMidBlock2D); the old attention names are those of v0.10.0's AttentionBlock, renamed on load
by modeling_utils.py's _convert_deprecated_attention_blocks). So state_dict() names, shapes and
order are diffusers' own, and the arithmetic is the same. docs/math/vae.md is the math written
out; docs/design.md §8 is the contract.

Run it (Debian's python, which has torch 1.13):

    /usr/bin/python3 tools/ref/ref_vae.py              # self-checks, then writes tests/fixtures/vae_*
    /usr/bin/python3 tools/ref/ref_vae.py --check      # self-checks only
    /usr/bin/python3 tools/ref/ref_vae.py --full DIR [--old] [--conv] [--f16]
        # a full-size (sd-vae-ft-ema config, 83.65M parameters, 335 MB) random-weight
        # DIR/diffusion_pytorch_model.safetensors + DIR/config.json, not committed
    /usr/bin/python3 tools/ref/ref_vae.py --describe FILE   # the config a diffusers file implies

Fixtures written to tests/fixtures (all computed in float64 from the float32-rounded stored
weights and inputs, stored as float32):
    vae_tiny.safetensors      the tiny config (TINY below: channels 4 8 16 16, the real file's 248
                              names) with random non-zero weights, diffusers layout, current
                              attention names (to_q/to_k/to_v/to_out.0, Linear [C, C]); metadata
                              format=pt, norm_num_groups=2
    vae_tiny_old.safetensors  the same weights under the old names (query/key/value/proj_attn),
                              attention weights 1x1-conv shaped [C, C, 1, 1]
    vae_tiny_ref.safetensors  reference tensors for that model:
        in.x        [2,3,32,24]  images in [-1, 1] (non-square on purpose: H != W)
        out.moments [2,8,4,3]    quant_conv(encoder(x)), before the clamp
        out.mean    [2,4,4,3]    posterior mean (moments channels 0..3)
        out.logvar  [2,4,4,3]    clamp(moments channels 4..7, -30, 20); channel 2 straddles -30
                                 and channel 3 straddles 20 (quant_conv biases set so; see
                                 CLAMP_CHANNELS), channels 0, 1 are unclamped
        in.z        [2,4,4,3]    scaled latents, as a diffusion model samples them
        out.x       [2,3,32,24]  decoder(post_quant_conv(in.z / 0.18215))
    vae_sd_names_new.txt      every tensor of the real sd-vae-ft-ema config, state_dict order,
    vae_sd_names_old.txt      `name d0 d1 ...` after one `#` line with the counts; new names, old
    vae_sd_names_oldconv.txt  names with Linear [C, C] attention weights, old names with 1x1-conv
                              [C, C, 1, 1] ones
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

SCALE = 0.18215          # DiT: z = posterior.sample() * 0.18215; x = decode(z / 0.18215)
NORM_EPS = 1e-6          # every GroupNorm of the VAE (resnet_eps, attention eps, conv_norm_out)
LOGVAR_MIN, LOGVAR_MAX = -30.0, 20.0   # DiagonalGaussianDistribution's clamp

# stabilityai/sd-vae-ft-ema (and -mse) config.json, the values that shape the network
SD_VAE = dict(in_channels=3, out_channels=3, block_out_channels=(128, 256, 512, 512),
              layers_per_block=2, latent_channels=4, norm_num_groups=32)
SD_VAE_PARAMS = 83653863  # sum of numel over state_dict() (asserted below)
# the test config: the real structure (4 levels, channels doubling twice then equal, so the same
# 248 tensor names with 4 conv_shortcuts; 2 resnets per encoder level, 3 per decoder level) at
# 1/32 of the channels, 2 groups (2, 4 and 8 channels per group: never one)
TINY = dict(in_channels=3, out_channels=3, block_out_channels=(4, 8, 16, 16),
            layers_per_block=2, latent_channels=4, norm_num_groups=2)

# old (diffusers <= 0.16 AttentionBlock; to_q... since 0.17) name -> current name, inside each mid-block attention
OLD_TO_NEW = {"query": "to_q", "key": "to_k", "value": "to_v", "proj_attn": "to_out.0"}
NEW_TO_OLD = {v: k for k, v in OLD_TO_NEW.items()}
ATTN_PATHS = ("encoder.mid_block.attentions.0", "decoder.mid_block.attentions.0")


# ---------------------------------------------------------------------------------------------
# Modules (diffusers' names and registration order; only the AutoencoderKL code paths)
# ---------------------------------------------------------------------------------------------

class ResnetBlock2D(nn.Module):
    """resnet.py ResnetBlock2D with temb_channels=None, time_embedding_norm="default",
    output_scale_factor=1, dropout 0: out = shortcut(x) + conv2(silu(norm2(conv1(silu(norm1(x))))))."""

    def __init__(self, in_channels, out_channels, groups):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_channels, eps=NORM_EPS, affine=True)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=1, padding=1)
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=NORM_EPS, affine=True)
        self.dropout = nn.Dropout(0.0)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1)
        self.nonlinearity = nn.SiLU()
        # use_in_shortcut = in_channels != out_channels: 1x1 conv with bias
        self.conv_shortcut = nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, x):
        h = self.conv1(self.nonlinearity(self.norm1(x)))
        h = self.conv2(self.dropout(self.nonlinearity(self.norm2(h))))
        if self.conv_shortcut is not None:
            x = self.conv_shortcut(x)
        return x + h


class Attention(nn.Module):
    """attention_processor.py Attention as UNetMidBlock2D builds it for the VAE: heads = C // C = 1,
    dim_head = C, bias=True, group_norm(groups, eps 1e-6), residual_connection=True,
    rescale_output_factor=1, run by AttnProcessor (softmax in float32: upcast_softmax)."""

    def __init__(self, channels, groups):
        super().__init__()
        self.group_norm = nn.GroupNorm(groups, channels, eps=NORM_EPS, affine=True)
        self.to_q = nn.Linear(channels, channels, bias=True)
        self.to_k = nn.Linear(channels, channels, bias=True)
        self.to_v = nn.Linear(channels, channels, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(channels, channels, bias=True), nn.Dropout(0.0)])
        self.scale = channels ** -0.5
        self.rescale_output_factor = 1.0

    def forward(self, x):
        residual = x
        n, c, h, w = x.shape
        t = x.view(n, c, h * w).transpose(1, 2)                  # [N, T, C], token = row * W + col
        t = self.group_norm(t.transpose(1, 2)).transpose(1, 2)   # GroupNorm over (C/G channels, T)
        q, k, v = self.to_q(t), self.to_k(t), self.to_v(t)
        scores = torch.baddbmm(torch.empty(n, h * w, h * w, dtype=q.dtype), q, k.transpose(-1, -2),
                               beta=0, alpha=self.scale)
        probs = scores.softmax(dim=-1)
        t = torch.bmm(probs, v)
        t = self.to_out[1](self.to_out[0](t))
        t = t.transpose(-1, -2).reshape(n, c, h, w)
        return (t + residual) / self.rescale_output_factor


class Downsample2D(nn.Module):
    """downsampling.py Downsample2D(use_conv=True, padding=0, name="op"): F.pad (0,1,0,1) (right
    and bottom by one), then a 3x3 stride-2 conv without padding. Registered as `conv`."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2, padding=0)

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1), mode="constant", value=0))


class Upsample2D(nn.Module):
    """upsampling.py Upsample2D(use_conv=True): nearest x2 (F.interpolate scale 2), 3x3 conv pad 1."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class DownEncoderBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers, groups, add_downsample):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(in_channels if i == 0 else out_channels, out_channels, groups)
                                      for i in range(num_layers)])
        self.downsamplers = nn.ModuleList([Downsample2D(out_channels)]) if add_downsample else None

    def forward(self, x):
        for r in self.resnets:
            x = r(x)
        if self.downsamplers is not None:
            x = self.downsamplers[0](x)
        return x


class UpDecoderBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers, groups, add_upsample):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(in_channels if i == 0 else out_channels, out_channels, groups)
                                      for i in range(num_layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(out_channels)]) if add_upsample else None

    def forward(self, x):
        for r in self.resnets:
            x = r(x)
        if self.upsamplers is not None:
            x = self.upsamplers[0](x)
        return x


class UNetMidBlock2D(nn.Module):
    """resnets[0], then (attentions[0], resnets[1]); attentions registered before resnets."""

    def __init__(self, channels, groups):
        super().__init__()
        self.attentions = nn.ModuleList([Attention(channels, groups)])
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels, groups),
                                      ResnetBlock2D(channels, channels, groups)])

    def forward(self, x):
        x = self.resnets[0](x)
        x = self.attentions[0](x)
        return self.resnets[1](x)


class Encoder(nn.Module):
    def __init__(self, in_channels, latent_channels, block_out_channels, layers_per_block, groups):
        super().__init__()
        ch = block_out_channels
        self.conv_in = nn.Conv2d(in_channels, ch[0], 3, stride=1, padding=1)
        self.down_blocks = nn.ModuleList([])  # registered before mid_block, as in diffusers
        prev = ch[0]
        for i, c in enumerate(ch):
            self.down_blocks.append(DownEncoderBlock2D(prev, c, layers_per_block, groups,
                                                       add_downsample=i != len(ch) - 1))
            prev = c
        self.mid_block = UNetMidBlock2D(ch[-1], groups)
        self.conv_norm_out = nn.GroupNorm(groups, ch[-1], eps=NORM_EPS)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(ch[-1], 2 * latent_channels, 3, padding=1)  # double_z

    def forward(self, x):
        x = self.conv_in(x)
        for b in self.down_blocks:
            x = b(x)
        x = self.mid_block(x)
        return self.conv_out(self.conv_act(self.conv_norm_out(x)))


class Decoder(nn.Module):
    def __init__(self, latent_channels, out_channels, block_out_channels, layers_per_block, groups):
        super().__init__()
        ch = block_out_channels
        self.conv_in = nn.Conv2d(latent_channels, ch[-1], 3, stride=1, padding=1)
        self.up_blocks = nn.ModuleList([])  # registered before mid_block, as in diffusers
        self.mid_block = UNetMidBlock2D(ch[-1], groups)
        rev = list(reversed(ch))
        prev = rev[0]
        for i, c in enumerate(rev):
            self.up_blocks.append(UpDecoderBlock2D(prev, c, layers_per_block + 1, groups,
                                                   add_upsample=i != len(ch) - 1))
            prev = c
        self.conv_norm_out = nn.GroupNorm(groups, ch[0], eps=NORM_EPS)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(ch[0], out_channels, 3, padding=1)

    def forward(self, z):
        x = self.conv_in(z)
        x = self.mid_block(x)
        for b in self.up_blocks:
            x = b(x)
        return self.conv_out(self.conv_act(self.conv_norm_out(x)))


class AutoencoderKL(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, block_out_channels=(128, 256, 512, 512),
                 layers_per_block=2, latent_channels=4, norm_num_groups=32):
        super().__init__()
        self.config = dict(in_channels=in_channels, out_channels=out_channels,
                           block_out_channels=tuple(block_out_channels), layers_per_block=layers_per_block,
                           latent_channels=latent_channels, norm_num_groups=norm_num_groups)
        self.encoder = Encoder(in_channels, latent_channels, block_out_channels, layers_per_block, norm_num_groups)
        self.decoder = Decoder(latent_channels, out_channels, block_out_channels, layers_per_block, norm_num_groups)
        self.quant_conv = nn.Conv2d(2 * latent_channels, 2 * latent_channels, 1)
        self.post_quant_conv = nn.Conv2d(latent_channels, latent_channels, 1)

    def moments(self, x):
        """quant_conv(encoder(x)): [N, 2*latent, H/f, W/f], f = 2^(levels-1)."""
        return self.quant_conv(self.encoder(x))

    def encode(self, x):
        """(mean, logvar) of the posterior, unscaled, logvar clamped to [-30, 20]."""
        mean, logvar = torch.chunk(self.moments(x), 2, dim=1)
        return mean, torch.clamp(logvar, LOGVAR_MIN, LOGVAR_MAX)

    def decode(self, z):
        """decoder(post_quant_conv(z)); z unscaled (divide a diffusion model's latent by SCALE)."""
        return self.decoder(self.post_quant_conv(z))


# ---------------------------------------------------------------------------------------------
# An independent functional forward over the state dict (the formulas of docs/math/vae.md: GroupNorm
# by hand, convolutions as im2col matmuls, attention as explicit matrices)
# ---------------------------------------------------------------------------------------------

def f_group_norm(x, w, b, groups):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    mu = g.mean(-1, keepdim=True)
    var = ((g - mu) ** 2).mean(-1, keepdim=True)  # biased variance
    y = ((g - mu) / torch.sqrt(var + NORM_EPS)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.dim() - 2)
    return y * w.reshape(shape) + b.reshape(shape)


def f_silu(x):
    return x / (1 + torch.exp(-x))


def f_conv(x, w, b, stride=1, pad=(1, 1, 1, 1)):
    """pad = (left, right, top, bottom) zeros, then y[o, i, j] = b[o] + sum_{c, u, v}
    w[o, c, u, v] x[c, stride i + u, stride j + v] (im2col + matmul)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = F.pad(x, pad)
    hp, wp = h + pad[2] + pad[3], wd + pad[0] + pad[1]
    ho, wo = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    cols = F.unfold(xp, (kh, kw), stride=stride)                # [N, C*kh*kw, ho*wo]
    y = w.reshape(o, -1) @ cols + b.reshape(1, o, 1)
    return y.reshape(n, o, ho, wo)


def f_resnet(sd, p, x, groups):
    h = f_conv(f_silu(f_group_norm(x, sd[p + ".norm1.weight"], sd[p + ".norm1.bias"], groups)),
               sd[p + ".conv1.weight"], sd[p + ".conv1.bias"])
    h = f_conv(f_silu(f_group_norm(h, sd[p + ".norm2.weight"], sd[p + ".norm2.bias"], groups)),
               sd[p + ".conv2.weight"], sd[p + ".conv2.bias"])
    if p + ".conv_shortcut.weight" in sd:
        x = f_conv(x, sd[p + ".conv_shortcut.weight"], sd[p + ".conv_shortcut.bias"], pad=(0, 0, 0, 0))
    return x + h


def f_attention(sd, p, x, groups):
    n, c, h, w = x.shape
    t = f_group_norm(x, sd[p + ".group_norm.weight"], sd[p + ".group_norm.bias"], groups)
    t = t.reshape(n, c, h * w).transpose(1, 2)                  # [N, T, C]
    q = t @ sd[p + ".to_q.weight"].T + sd[p + ".to_q.bias"]
    k = t @ sd[p + ".to_k.weight"].T + sd[p + ".to_k.bias"]
    v = t @ sd[p + ".to_v.weight"].T + sd[p + ".to_v.bias"]
    s = q @ k.transpose(1, 2) / math.sqrt(c)
    s = s - s.max(-1, keepdim=True).values
    a = torch.exp(s) / torch.exp(s).sum(-1, keepdim=True)
    o = (a @ v) @ sd[p + ".to_out.0.weight"].T + sd[p + ".to_out.0.bias"]
    return x + o.transpose(1, 2).reshape(n, c, h, w)


def f_mid(sd, p, x, groups):
    x = f_resnet(sd, p + ".resnets.0", x, groups)
    x = f_attention(sd, p + ".attentions.0", x, groups)
    return f_resnet(sd, p + ".resnets.1", x, groups)


def f_moments(sd, cfg, x):
    g, ch, L = cfg["norm_num_groups"], cfg["block_out_channels"], cfg["layers_per_block"]
    x = f_conv(x, sd["encoder.conv_in.weight"], sd["encoder.conv_in.bias"])
    for i in range(len(ch)):
        for j in range(L):
            x = f_resnet(sd, f"encoder.down_blocks.{i}.resnets.{j}", x, g)
        if i != len(ch) - 1:
            p = f"encoder.down_blocks.{i}.downsamplers.0.conv"
            x = f_conv(x, sd[p + ".weight"], sd[p + ".bias"], stride=2, pad=(0, 1, 0, 1))
    x = f_mid(sd, "encoder.mid_block", x, g)
    x = f_silu(f_group_norm(x, sd["encoder.conv_norm_out.weight"], sd["encoder.conv_norm_out.bias"], g))
    x = f_conv(x, sd["encoder.conv_out.weight"], sd["encoder.conv_out.bias"])
    return f_conv(x, sd["quant_conv.weight"], sd["quant_conv.bias"], pad=(0, 0, 0, 0))


def f_decode(sd, cfg, z):
    g, ch, L = cfg["norm_num_groups"], cfg["block_out_channels"], cfg["layers_per_block"]
    x = f_conv(z, sd["post_quant_conv.weight"], sd["post_quant_conv.bias"], pad=(0, 0, 0, 0))
    x = f_conv(x, sd["decoder.conv_in.weight"], sd["decoder.conv_in.bias"])
    x = f_mid(sd, "decoder.mid_block", x, g)
    for i in range(len(ch)):
        for j in range(L + 1):
            x = f_resnet(sd, f"decoder.up_blocks.{i}.resnets.{j}", x, g)
        if i != len(ch) - 1:
            x = x.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)  # nearest x2
            p = f"decoder.up_blocks.{i}.upsamplers.0.conv"
            x = f_conv(x, sd[p + ".weight"], sd[p + ".bias"])
    x = f_silu(f_group_norm(x, sd["decoder.conv_norm_out.weight"], sd["decoder.conv_norm_out.bias"], g))
    return f_conv(x, sd["decoder.conv_out.weight"], sd["decoder.conv_out.bias"])


# ---------------------------------------------------------------------------------------------
# diffusers files: naming, writing, reading
# ---------------------------------------------------------------------------------------------

def to_old_names(sd, conv_shaped):
    """Current names -> the old query/key/value/proj_attn ones (group_norm keeps its name);
    conv_shaped: the four attention weights as [C, C, 1, 1]. Order kept."""
    out = {}
    for k, v in sd.items():
        for path in ATTN_PATHS:
            for new, old in NEW_TO_OLD.items():
                for leaf in ("weight", "bias"):
                    if k == f"{path}.{new}.{leaf}":
                        k = f"{path}.{old}.{leaf}"
                        if conv_shaped and leaf == "weight":
                            v = v.reshape(tuple(v.shape) + (1, 1))
        out[k] = v
    return out


def to_new_names(sd):
    """Inverse of to_old_names (what diffusers' _convert_deprecated_attention_blocks does, plus the
    [C, C, 1, 1] -> [C, C] squeeze of the 1x1-conv shaped files); current names pass through."""
    out = {}
    for k, v in sd.items():
        for path in ATTN_PATHS:
            for old, new in OLD_TO_NEW.items():
                for leaf in ("weight", "bias"):
                    if k == f"{path}.{old}.{leaf}":
                        k = f"{path}.{new}.{leaf}"
        if any(k.startswith(p + ".to_") for p in ATTN_PATHS) and k.endswith(".weight") and v.dim() == 4:
            if tuple(v.shape[2:]) != (1, 1):
                raise ValueError(f"{k}: conv-shaped attention weight must be [C, C, 1, 1], got {list(v.shape)}")
            v = v.reshape(v.shape[:2])
        out[k] = v
    return out


def save_diffusers(model, path, naming="new", conv_shaped=False, dtype="F32", norm_groups_meta=None):
    """Writes `diffusion_pytorch_model.safetensors` as diffusers' save_pretrained does (metadata
    {"format": "pt"}), under the current names (naming="new") or the old ones (naming="old",
    optionally with 1x1-conv shaped attention weights). norm_groups_meta: also record
    norm_num_groups in the metadata (our test files; the real file has no such key)."""
    if naming not in ("new", "old"):
        raise ValueError("naming must be 'new' or 'old'")
    sd = {k: v.detach().float() for k, v in model.state_dict().items()}
    if naming == "old":
        sd = to_old_names(sd, conv_shaped)
    np_dt = {"F32": np.float32, "F16": np.float16}[dtype]
    arrays = {k: v.numpy().astype(np_dt) for k, v in sd.items()}
    meta = {"format": "pt"}
    if norm_groups_meta is not None:
        meta["norm_num_groups"] = str(int(norm_groups_meta))
    st_io.save(path, arrays, meta)


def config_from_tensors(arrays, meta):
    """The config a diffusers AutoencoderKL file implies: channels from the conv shapes, levels and
    resnets per level from the names, groups from metadata norm_num_groups (else 32)."""
    names = set(arrays)
    levels = 0
    while f"encoder.down_blocks.{levels}.resnets.0.conv1.weight" in names:
        levels += 1
    if levels == 0:
        raise ValueError("no encoder.down_blocks.0.resnets.0.conv1.weight: not an AutoencoderKL file")
    ch = tuple(int(arrays[f"encoder.down_blocks.{i}.resnets.0.conv1.weight"].shape[0]) for i in range(levels))
    lpb = 0
    while f"encoder.down_blocks.0.resnets.{lpb}.conv1.weight" in names:
        lpb += 1
    return dict(in_channels=int(arrays["encoder.conv_in.weight"].shape[1]),
                out_channels=int(arrays["decoder.conv_out.weight"].shape[0]),
                block_out_channels=ch, layers_per_block=lpb,
                latent_channels=int(arrays["post_quant_conv.weight"].shape[0]),
                norm_num_groups=int(meta.get("norm_num_groups", 32)))


def load_diffusers(path, dtype=torch.float32):
    """An AutoencoderKL from a diffusers safetensors file under either naming, strict (every
    tensor used, none missing, shapes equal). Returns (model, config)."""
    arrays, meta = st_io.load(path)
    cfg = config_from_tensors(arrays, meta)
    model = AutoencoderKL(**cfg)
    sd = to_new_names({k: torch.from_numpy(np.asarray(a, dtype=np.float32)) for k, a in arrays.items()})
    model.load_state_dict(sd, strict=True)
    return model.to(dtype).eval(), cfg


def diffusers_config_json(cfg):
    """config.json as the sd-vae-ft-ema repository has it (for a full-size file's directory)."""
    n = len(cfg["block_out_channels"])
    return {"_class_name": "AutoencoderKL", "act_fn": "silu",
            "block_out_channels": list(cfg["block_out_channels"]),
            "down_block_types": ["DownEncoderBlock2D"] * n, "in_channels": cfg["in_channels"],
            "latent_channels": cfg["latent_channels"], "layers_per_block": cfg["layers_per_block"],
            "norm_num_groups": cfg["norm_num_groups"], "out_channels": cfg["out_channels"],
            "sample_size": 256, "scaling_factor": SCALE, "up_block_types": ["UpDecoderBlock2D"] * n}


# ---------------------------------------------------------------------------------------------
# Random weights, images, counts
# ---------------------------------------------------------------------------------------------

def random_init(model, seed):
    """Non-zero random weights that keep activations O(1) through the whole network: conv and
    linear weights uniform with variance 1/fan_in (attention q, k with 1.5x that spread so the
    softmax is far from uniform), GroupNorm scales in [0.8, 1.2], every bias and GroupNorm shift
    in [-0.2, 0.2]. Drawn in state_dict order from numpy's PCG64, rounded to float32."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.state_dict().items():
            shape = tuple(p.shape)
            if name.endswith(".weight") and len(shape) >= 2:
                fan_in = int(np.prod(shape[1:]))
                a = math.sqrt(3.0 / fan_in)
                if ".to_q." in name or ".to_k." in name:
                    a *= 1.5
                v = rng.uniform(-a, a, size=shape)
            elif name.endswith(".weight"):  # GroupNorm scale
                v = rng.uniform(0.8, 1.2, size=shape)
            else:
                v = rng.uniform(-0.2, 0.2, size=shape)
            p.copy_(torch.from_numpy(v.astype(np.float32)))


def make_images(n, c, h, w, seed):
    """Smooth colour patterns plus noise in [-1, 1], float32 (the scale the VAE takes)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    out = np.empty((n, c, h, w), np.float64)
    for i in range(n):
        for ch in range(c):
            f = rng.uniform(1, 4, size=3)
            p = rng.uniform(0, 6.3, size=2)
            v = 0.6 * np.sin(f[0] * 6.28 * xx + p[0]) * np.cos(f[1] * 6.28 * yy + p[1])
            v += 0.3 * ((xx + f[2] * yy) % 1.0) - 0.15
            v += rng.normal(0, 0.1, size=(h, w))
            out[i, ch] = v
    return np.clip(out, -1, 1).astype(np.float32)


def param_count(cfg):
    """Closed form of sum(numel) over state_dict() (checked against the module in the self-checks)."""
    ch, L, cin, cout, lat = (cfg["block_out_channels"], cfg["layers_per_block"], cfg["in_channels"],
                             cfg["out_channels"], cfg["latent_channels"])

    def conv(i, o, k):
        return o * i * k * k + o

    def gn(c):
        return 2 * c

    def res(i, o):
        return gn(i) + conv(i, o, 3) + gn(o) + conv(o, o, 3) + (conv(i, o, 1) if i != o else 0)

    def mid(c):
        return gn(c) + 4 * (c * c + c) + 2 * res(c, c)

    enc = conv(cin, ch[0], 3)
    prev = ch[0]
    for i, c in enumerate(ch):
        enc += res(prev, c) + (L - 1) * res(c, c) + (conv(c, c, 3) if i != len(ch) - 1 else 0)
        prev = c
    enc += mid(ch[-1]) + gn(ch[-1]) + conv(ch[-1], 2 * lat, 3)
    dec = conv(lat, ch[-1], 3) + mid(ch[-1])
    rev = list(reversed(ch))
    prev = rev[0]
    for i, c in enumerate(rev):
        dec += res(prev, c) + L * res(c, c) + (conv(c, c, 3) if i != len(ch) - 1 else 0)
        prev = c
    dec += gn(ch[0]) + conv(ch[0], cout, 3)
    return enc + dec + conv(2 * lat, 2 * lat, 1) + conv(lat, lat, 1)


def flop_report(cfg, size):
    """Multiply-accumulates of one size x size image through the encoder and the decoder (convs,
    attention projections, QK^T and AV), the elementwise work (GroupNorm, SiLU, softmax, adds)
    counted separately in elements touched, and the activation sizes, found by running the module
    on meta-free zero input with forward hooks. Returns a dict."""
    model = AutoencoderKL(**cfg)
    stats = {"enc": [0, 0], "dec": [0, 0]}
    acts = []
    part = ["enc"]

    def hook(mod, inp, out):
        x = inp[0]
        if isinstance(mod, nn.Conv2d):
            stats[part[0]][0] += out.numel() * mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1]
        elif isinstance(mod, Attention):
            n, c, h, w = x.shape
            t = h * w
            stats[part[0]][0] += 4 * t * c * c + 2 * t * t * c     # q, k, v, out; QK^T; AV
            stats[part[0]][1] += 3 * t * t                          # softmax: max/exp/sum-divide
            acts.append(("attention scores " + part[0], (t, t)))
        elif isinstance(mod, nn.GroupNorm):
            stats[part[0]][1] += 2 * x.numel()
        elif isinstance(mod, nn.SiLU):
            stats[part[0]][1] += x.numel()
        if isinstance(mod, (nn.Conv2d, ResnetBlock2D, Upsample2D, Downsample2D)):
            acts.append((part[0], tuple(out.shape[1:])))

    for m in model.modules():
        m.register_forward_hook(hook)
    with torch.no_grad():
        part[0] = "enc"
        mom = model.moments(torch.zeros(1, cfg["in_channels"], size, size))
        part[0] = "dec"
        model.decode(torch.zeros(1, cfg["latent_channels"], mom.shape[2], mom.shape[3]))
    return {"enc_macs": stats["enc"][0], "enc_elem": stats["enc"][1],
            "dec_macs": stats["dec"][0], "dec_elem": stats["dec"][1], "acts": acts}


def write_names(path, naming, conv_shaped):
    m = AutoencoderKL(**SD_VAE)
    sd = {k: v for k, v in m.state_dict().items()}
    total = sum(v.numel() for v in sd.values())
    assert total == SD_VAE_PARAMS == param_count(SD_VAE), (total, param_count(SD_VAE))
    if naming == "old":
        sd = to_old_names(sd, conv_shaped)
    desc = {"new": "to_q/to_k/to_v/to_out.0 attention names",
            "old": "query/key/value/proj_attn attention names" +
                   (", 1x1-conv shaped [C,C,1,1]" if conv_shaped else ", Linear shaped [C,C]")}[naming]
    with open(path, "w") as f:
        f.write(f"# diffusers AutoencoderKL, stabilityai/sd-vae-ft-ema config (block_out_channels "
                f"128 256 512 512, layers_per_block 2, norm_num_groups 32, latent_channels 4), {desc}: "
                f"{len(sd)} tensors, {total} parameters\n")
        for k, v in sd.items():
            f.write(" ".join([k] + [str(d) for d in v.shape]) + "\n")
    print(f"{path}: {len(sd)} tensors, {total} parameters")


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------

CLAMP_CHANNELS = {2: LOGVAR_MIN, 3: LOGVAR_MAX}  # logvar channel -> clamp bound it straddles


def make_tiny(outdir, seed=1400):
    model = AutoencoderKL(**TINY)
    random_init(model, seed)
    x = torch.from_numpy(make_images(2, 3, 32, 24, seed + 1))
    lat = TINY["latent_channels"]
    # Shift the quant_conv biases of two logvar channels so that about half of their values lie
    # beyond the clamp bounds (each channel's median lands on its bound): exercises both ends of
    # the clamp. The shift is rounded to float32 like every stored weight.
    with torch.no_grad():
        mom = model.double().moments(x.double())
        for c, bound in CLAMP_CHANNELS.items():
            med = float(mom[:, lat + c].median())
            model.quant_conv.bias[lat + c] += bound - med
        model.float()
    rng = np.random.default_rng(seed + 2)
    z = torch.from_numpy(rng.standard_normal((2, lat, 4, 3)).astype(np.float32))  # scaled latents

    paths = {"new": os.path.join(outdir, "vae_tiny.safetensors"),
             "old": os.path.join(outdir, "vae_tiny_old.safetensors")}
    save_diffusers(model, paths["new"], "new", norm_groups_meta=TINY["norm_num_groups"])
    save_diffusers(model, paths["old"], "old", conv_shaped=True, norm_groups_meta=TINY["norm_num_groups"])

    m64 = model.double().eval()
    with torch.no_grad():
        mom = m64.moments(x.double())
        mean, logvar = m64.encode(x.double())
        xo = m64.decode(z.double() / SCALE)
    ref = {"in.x": x, "out.moments": mom.float(), "out.mean": mean.float(), "out.logvar": logvar.float(),
           "in.z": z, "out.x": xo.float()}
    meta = {"scale": repr(SCALE), "config": json.dumps(TINY, separators=(",", ":")),
            "weights": "vae_tiny.safetensors",
            "note": "out.x = decoder(post_quant_conv(in.z / scale)); out.logvar = clamp(out.moments[:,4:], -30, 20); "
                    "logvar channel 2 straddles -30, channel 3 straddles 20; float64 reference stored as float32"}
    ref_path = os.path.join(outdir, "vae_tiny_ref.safetensors")
    st_io.save(ref_path, ref, meta)
    return paths, ref_path


def verify_fixture(paths, ref_path):
    """Reload both weight files (strict) and recompute everything with the module and with the
    functional forward, in float64."""
    ref, rmeta = st_io.load(ref_path)
    t = {k: torch.from_numpy(v).double() for k, v in ref.items()}
    for naming, p in paths.items():
        arrays, meta = st_io.load(p)
        assert meta == {"format": "pt", "norm_num_groups": str(TINY["norm_num_groups"])}, meta
        assert len(arrays) == 248 and sum(a.size for a in arrays.values()) == param_count(TINY)
        assert all(a.dtype == np.float32 for a in arrays.values())
        m, cfg = load_diffusers(p, torch.float64)
        assert cfg == dict(TINY), cfg
        if naming == "old":
            assert arrays["encoder.mid_block.attentions.0.query.weight"].shape == (16, 16, 1, 1)
            assert not any(".to_" in k for k in arrays)
        with torch.no_grad():
            mean, logvar = m.encode(t["in.x"])
            xo = m.decode(t["in.z"] / SCALE)
            sd = {k: v.double() for k, v in m.state_dict().items()}
            fm = f_moments(sd, cfg, t["in.x"])
            fx = f_decode(sd, cfg, t["in.z"] / SCALE)
        for name, got in (("out.mean", mean), ("out.logvar", logvar), ("out.x", xo),
                          ("out.moments", fm), ("out.x", fx)):
            err = float((got.float().double() - t[name]).abs().max())
            assert err == 0.0 or err < 1e-6 * float(t[name].abs().max()), (naming, name, err)
    lv = t["out.logvar"]
    lat = TINY["latent_channels"]
    for c, bound in CLAMP_CHANNELS.items():
        hit = (lv[:, c] == bound).double().mean().item()
        assert 0.2 < hit < 0.8, (c, hit)
    assert float(lv[:, :2].abs().max()) < 15 and float(lv.min()) == LOGVAR_MIN and float(lv.max()) == LOGVAR_MAX
    assert torch.equal(torch.clamp(t["out.moments"][:, lat:], -30, 20), lv)
    # the outputs are far from trivial: spread, no constant channel
    assert float(t["out.mean"].std()) > 0.05 and float(t["out.x"].std()) > 0.05
    assert float(t["out.x"].std(dim=(2, 3)).min()) > 1e-3
    print(f"{ref_path}: mean std {float(t['out.mean'].std()):.3f}, decode std {float(t['out.x'].std()):.3f}, "
          f"logvar clamped fraction ch2 {(lv[:, 2] == -30).double().mean():.2f} ch3 {(lv[:, 3] == 20).double().mean():.2f}")


# ---------------------------------------------------------------------------------------------
# Self-checks
# ---------------------------------------------------------------------------------------------

def self_checks():
    dt = torch.float64
    torch.manual_seed(0)
    with torch.no_grad():
        # 1. names, shapes, order and count of the real config: diffusers' state_dict
        m = AutoencoderKL(**SD_VAE)
        sd = m.state_dict()
        names = list(sd)
        assert sum(v.numel() for v in sd.values()) == SD_VAE_PARAMS == param_count(SD_VAE)
        assert len(names) == 248, len(names)
        assert names[:4] == ["encoder.conv_in.weight", "encoder.conv_in.bias",
                             "encoder.down_blocks.0.resnets.0.norm1.weight",
                             "encoder.down_blocks.0.resnets.0.norm1.bias"], names[:4]
        i_mid = names.index("encoder.mid_block.attentions.0.group_norm.weight")
        assert names[i_mid - 2:i_mid] == ["encoder.down_blocks.3.resnets.1.conv2.weight",
                                          "encoder.down_blocks.3.resnets.1.conv2.bias"]
        assert names[i_mid + 1:i_mid + 4] == ["encoder.mid_block.attentions.0.group_norm.bias",
                                              "encoder.mid_block.attentions.0.to_q.weight",
                                              "encoder.mid_block.attentions.0.to_q.bias"]
        assert names.index("decoder.up_blocks.0.resnets.0.norm1.weight") < names.index(
            "decoder.mid_block.attentions.0.group_norm.weight")  # up_blocks registered first
        assert names[-4:] == ["quant_conv.weight", "quant_conv.bias", "post_quant_conv.weight", "post_quant_conv.bias"]
        want_shapes = {"encoder.down_blocks.0.downsamplers.0.conv.weight": (128, 128, 3, 3),
                       "encoder.down_blocks.1.resnets.0.conv_shortcut.weight": (256, 128, 1, 1),
                       "encoder.down_blocks.2.resnets.0.conv_shortcut.weight": (512, 256, 1, 1),
                       "encoder.conv_out.weight": (8, 512, 3, 3), "quant_conv.weight": (8, 8, 1, 1),
                       "decoder.conv_in.weight": (512, 4, 3, 3), "decoder.up_blocks.2.resnets.0.conv_shortcut.weight": (256, 512, 1, 1),
                       "decoder.up_blocks.3.resnets.0.conv_shortcut.weight": (128, 256, 1, 1),
                       "decoder.up_blocks.2.upsamplers.0.conv.weight": (256, 256, 3, 3),
                       "decoder.up_blocks.3.resnets.2.conv2.weight": (128, 128, 3, 3),
                       "decoder.mid_block.attentions.0.to_out.0.weight": (512, 512),
                       "post_quant_conv.weight": (4, 4, 1, 1), "decoder.conv_out.weight": (3, 128, 3, 3)}
        for k, s in want_shapes.items():
            assert tuple(sd[k].shape) == s, (k, sd[k].shape)
        assert "encoder.down_blocks.3.downsamplers.0.conv.weight" not in sd
        assert "decoder.up_blocks.3.upsamplers.0.conv.weight" not in sd
        assert "decoder.up_blocks.0.resnets.2.conv1.weight" in sd and "decoder.up_blocks.0.resnets.3.conv1.weight" not in sd
        assert sum(1 for k in sd if "conv_shortcut.weight" in k) == 4

        # 2. old names: 16 renamed tensors, round trip in both shapes
        for conv in (False, True):
            old = to_old_names(sd, conv)
            assert len(old) == len(sd) and sum(1 for a, b in zip(old, sd) if a != b) == 16
            assert ("encoder.mid_block.attentions.0.proj_attn.weight" in old and
                    "decoder.mid_block.attentions.0.query.bias" in old)
            assert tuple(old["decoder.mid_block.attentions.0.key.weight"].shape) == ((512, 512, 1, 1) if conv else (512, 512))
            back = to_new_names(old)
            assert list(back) == names and all(torch.equal(back[k], sd[k]) for k in names)

        # 3. the attention equals one-head nn.MultiheadAttention on group-normed tokens + residual
        att = Attention(12, 3).double()
        for p in att.parameters():
            p.normal_(0, 0.4)
        x = torch.randn(2, 12, 3, 5, dtype=dt)
        mha = nn.MultiheadAttention(12, 1, bias=True, batch_first=True).double()
        mha.in_proj_weight.copy_(torch.cat([att.to_q.weight, att.to_k.weight, att.to_v.weight]))
        mha.in_proj_bias.copy_(torch.cat([att.to_q.bias, att.to_k.bias, att.to_v.bias]))
        mha.out_proj.weight.copy_(att.to_out[0].weight)
        mha.out_proj.bias.copy_(att.to_out[0].bias)
        tok = att.group_norm(x).flatten(2).transpose(1, 2)
        want = mha(tok, tok, tok, need_weights=False)[0].transpose(1, 2).reshape(x.shape) + x
        assert torch.allclose(att(x), want, rtol=0, atol=1e-12)
        assert torch.allclose(att(x), f_attention({"p." + k: v for k, v in att.state_dict().items()}, "p", x, 3),
                          rtol=0, atol=1e-12)

        # 4. GroupNorm, the padded stride-2 conv, nearest x2, by hand
        gnm = nn.GroupNorm(3, 12, eps=NORM_EPS).double()
        gnm.weight.normal_()
        gnm.bias.normal_()
        assert torch.allclose(gnm(x), f_group_norm(x, gnm.weight, gnm.bias, 3), rtol=0, atol=1e-12)
        ds = Downsample2D(12).double()
        for hw in ((8, 6), (7, 5)):
            xi = torch.randn(1, 12, *hw, dtype=dt)
            y = ds(xi)
            assert tuple(y.shape[2:]) == (hw[0] // 2, hw[1] // 2), y.shape  # floor(H/2)
            # y[i, j] reads rows 2i..2i+2, cols 2j..2j+2 of x with a zero row/col appended
            xp = torch.zeros(1, 12, hw[0] + 1, hw[1] + 1, dtype=dt)
            xp[:, :, :hw[0], :hw[1]] = xi
            i, j = y.shape[2] - 1, y.shape[3] - 1
            v = (ds.conv.weight * xp[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3]).sum((1, 2, 3)) + ds.conv.bias
            assert torch.allclose(y[0, :, i, j], v, rtol=0, atol=1e-12)
            assert torch.allclose(y, f_conv(xi, ds.conv.weight, ds.conv.bias, 2, (0, 1, 0, 1)), rtol=0, atol=1e-12)
        up = F.interpolate(x, scale_factor=2.0, mode="nearest")
        assert torch.equal(up[:, :, 5, 7], x[:, :, 2, 3]) and torch.equal(
            up, x.repeat_interleave(2, 2).repeat_interleave(2, 3))

        # 5. whole tiny model: module == functional forward, both namings load back strictly
        mt = AutoencoderKL(**TINY)
        random_init(mt, 7)
        mt = mt.double().eval()
        xi = torch.from_numpy(make_images(1, 3, 16, 24, 3)).double()
        mean, logvar = mt.encode(xi)
        assert mean.shape == (1, 4, 2, 3) and logvar.shape == (1, 4, 2, 3)
        sdt = mt.state_dict()
        assert torch.allclose(torch.cat([mean, logvar], 1), f_moments(sdt, TINY, xi), rtol=0, atol=1e-10)
        zt = torch.randn(1, 4, 2, 3, dtype=dt)
        dec = mt.decode(zt)
        assert dec.shape == (1, 3, 16, 24)
        assert torch.allclose(dec, f_decode(sdt, TINY, zt), rtol=0, atol=1e-10)
        assert sum(v.numel() for v in sdt.values()) == param_count(TINY)
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            for naming, conv in (("new", False), ("old", False), ("old", True)):
                p = os.path.join(tmp, "diffusion_pytorch_model.safetensors")
                save_diffusers(mt, p, naming, conv, norm_groups_meta=TINY["norm_num_groups"])
                m2, cfg2 = load_diffusers(p, dt)
                assert cfg2 == dict(TINY)
                assert torch.allclose(m2.decode(zt), f_decode({k: v.float().double() for k, v in sdt.items()}, TINY, zt),
                                      rtol=0, atol=1e-10)
            save_diffusers(mt, p, "new", dtype="F16")   # no norm_num_groups: 32 assumed
            arrays, meta = st_io.load(p)
            assert meta == {"format": "pt"} and arrays["quant_conv.weight"].dtype == np.float16
            assert config_from_tensors(arrays, meta)["norm_num_groups"] == 32
        # 6. the clamp is diffusers' (values beyond it come back as the bounds)
        mt.quant_conv.bias[6] += 100.0
        mt.quant_conv.bias[7] -= 100.0
        _, lv = mt.encode(xi)
        assert torch.all(lv[:, 2] == 20.0) and torch.all(lv[:, 3] == -30.0)
    print("self-checks passed: sd-vae-ft-ema state_dict (248 tensors, 83653863 parameters, names/order/shapes), "
          "old-name round trip (Linear and 1x1-conv), attention == one-head MultiheadAttention + residual, "
          "GroupNorm / padded stride-2 conv / nearest x2 by hand, module == functional forward, strict reload "
          "under three layouts and F16, logvar clamp")


# ---------------------------------------------------------------------------------------------

def write_full(outdir, naming, conv, dtype, seed=14):
    os.makedirs(outdir, exist_ok=True)
    m = AutoencoderKL(**SD_VAE)
    random_init(m, seed)
    p = os.path.join(outdir, "diffusion_pytorch_model.safetensors")
    save_diffusers(m, p, naming, conv, dtype)
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(diffusers_config_json(SD_VAE), f, indent=2)
    print(f"{p}: {os.path.getsize(p) / 1e6:.1f} MB, {naming} names{' (1x1-conv)' if conv else ''}, {dtype}")


def describe(path):
    arrays, meta = st_io.load(path)
    cfg = config_from_tensors(arrays, meta)
    old = any(k.endswith(".query.weight") for k in arrays)
    print(f"{path}: {len(arrays)} tensors, {sum(a.size for a in arrays.values())} parameters, "
          f"{'old' if old else 'new'} attention names, metadata {meta}")
    print("config:", json.dumps(cfg))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="self-checks only")
    ap.add_argument("--full", metavar="DIR", help="write a full-size random-weight file to DIR")
    ap.add_argument("--old", action="store_true", help="with --full: old attention names")
    ap.add_argument("--conv", action="store_true", help="with --full --old: 1x1-conv shaped attention weights")
    ap.add_argument("--f16", action="store_true", help="with --full: F16 tensors")
    ap.add_argument("--describe", metavar="FILE", help="print the config a diffusers VAE file implies")
    ap.add_argument("--flops", type=int, metavar="SIZE", help="MACs and activation sizes at SIZE x SIZE, real config")
    ap.add_argument("--out", default=None, help="fixture directory (default tests/fixtures)")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    if args.describe:
        return describe(args.describe)
    if args.flops:
        r = flop_report(SD_VAE, args.flops)
        print(f"{args.flops}x{args.flops}: encoder {r['enc_macs'] / 1e9:.2f} GMAC ({2 * r['enc_macs'] / 1e9:.1f} GFLOP) "
              f"+ {r['enc_elem'] / 1e6:.0f}M elementwise; decoder {r['dec_macs'] / 1e9:.2f} GMAC "
              f"({2 * r['dec_macs'] / 1e9:.1f} GFLOP) + {r['dec_elem'] / 1e6:.0f}M elementwise")
        big = sorted({(p, s) for p, s in r["acts"]}, key=lambda a: -int(np.prod(a[1])))[:6]
        for p, s in big:
            print(f"  {p:28s} {list(s)}  {int(np.prod(s)) * 4 / 2**20:.0f} MiB per image (F32)")
        return
    if args.full:
        return write_full(args.full, "old" if args.old else "new", args.conv, "F16" if args.f16 else "F32")
    self_checks()
    if args.check:
        return
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    outdir = args.out or os.path.join(root, "tests", "fixtures")
    os.makedirs(outdir, exist_ok=True)
    verify_fixture(*make_tiny(outdir))
    write_names(os.path.join(outdir, "vae_sd_names_new.txt"), "new", False)
    write_names(os.path.join(outdir, "vae_sd_names_old.txt"), "old", False)
    write_names(os.path.join(outdir, "vae_sd_names_oldconv.txt"), "old", True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
