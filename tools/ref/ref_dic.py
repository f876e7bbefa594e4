#!/usr/bin/python3
"""PyTorch reference for mala-dit's DiC backbone (YuchuanTian/DiC dic_models.py, written here).

The official model is `DiC_S` and its siblings, `DiC_default` = DiC(mult_channels=[1,2,4,2,1],
norm 'gnorm' (groups min(32, C/4), eps 1e-5), actfunc 'gelu' (exact erf), actinada=1 (SiLU on
the condition), affinef=3 (gate, scale, shift), blockconfig=0, skip_stride=3), from
YuchuanTian/DiC at commit bfa541b5e3a968919f3a399fc0e223e877439b3b (dic_models.py imports
nothing else of the repository). This file is plain PyTorch (no einops, timm): the same module
tree, so the state_dict names, shapes and order are the official ones, and the same arithmetic.
docs/math/dic.md is the math, written out; tools/ref/check_dic_official.py runs the official class
against this file's fixtures.

Run it (Debian's python, which has torch 1.13):

    /usr/bin/python3 tools/ref/ref_dic.py            # self-checks, then writes tests/fixtures/dic_*
    /usr/bin/python3 tools/ref/ref_dic.py --check    # self-checks only

Fixture file tests/fixtures/dic_<name>.safetensors, one per config in CONFIGS, laid out as the
DiT / DiG fixtures:
    <param name>          every parameter (F32, PyTorch layout)
    in.x  [B,C,S,S] F32   input image          in.t [B] F32 timesteps      in.y [B] I32 labels
    in.dout [B,Cout,S,S]  upstream gradient; loss = sum(out * dout)
    out   [B,Cout,S,S]    model(in.x, in.t, in.y)
    grad.<param name>     d loss / d param for every parameter (all are trainable)
    __metadata__          docs/design.md §7 keys: backbone=dic, hidden, depths, multipliers (JSON
                          arrays), skip_stride, image_size, in_channels, num_classes, learn_sigma,
                          class_names
Computed in float64 from the float32-rounded stored weights and inputs, stored as float32; each
file is re-checked by `functional_forward`, a second implementation written from docs/math/dic.md's
formulas (im2col convs, GroupNorm / LayerNorm / GELU / pixel (un)shuffle by their definitions)
that reads only the state_dict. The weights are random and non-zero except in dic_init, which
holds the official initialisation (output exactly 0).
tests/fixtures/dic_s_names.txt: `name d0 d1 ...` for every tensor of the official DiC-S
(32x32x4 latent, 1000 classes, learned sigma) in state_dict order, after a `#` line with the
parameter count.
"""

import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402
from ref_dit import LabelEmbedder, TimestepEmbedder  # noqa: E402

GN_EPS = 1e-5            # block GroupNorms (UNetBlock eps)
GN_MAX_GROUPS = 32       # GroupNorm(num_groups=32, min_channels_per_group=4)
GN_MIN_CHANNELS = 4      # groups = min(32, C // 4)
LN_EPS = 1e-6            # final LayerNorm2d (no affine)
FREQ_DIM = 256           # timestep frequency embedding
CLASS_DROPOUT = 0.1
SHUFFLE = 2              # pixel (un)shuffle factor

# Official presets (dic_models.py, all DiC_default: multipliers [1,2,4,2,1], skip_stride 3):
# name -> (hidden, depths). T is this project's CPU preset: DiC-S at a third of its width and
# depth (0.54 GFLOPs and 1.67M parameters at 32x32x1, 10 classes: DiT-T/2 0.43, DiG-T/2 0.56),
# for training on 32x32x1 on two cores. Keep in step with the C table.
PRESETS = {"T": (32, [2, 2, 2, 2, 2]), "S": (96, [6, 6, 5, 6, 6]), "B": (192, [6, 6, 5, 6, 6]),
           "XL": (384, [7, 7, 8, 7, 7]), "H": (384, [14, 14, 10, 14, 14])}
DEFAULT_MULTIPLIERS = [1, 2, 4, 2, 1]
DEFAULT_SKIP_STRIDE = 3


def gn_groups(channels):
    """GroupNorm's group count: min(32, C // 4) (dic_models.GroupNorm)."""
    return min(GN_MAX_GROUPS, channels // GN_MIN_CHANNELS)


# ---------------------------------------------------------------------------------------------
# The plan: stage widths, resolutions, conditions and skips, from the configuration alone
# ---------------------------------------------------------------------------------------------

class Plan:
    """Everything the configuration fixes, as the official constructor and forward derive it.
    Stages s = 0 .. 2L-2 (L = levels = (len(depths)+1)/2): encoder s < L-1, latent s = L-1,
    decoder s >= L. Stage s has width W[s] = hidden * multipliers[s], works at level
    lvl[s] = min(s, 2L-2-s) (grid S / 2^lvl) and is conditioned by embedder cond[s]."""

    def __init__(self, hidden, depths, multipliers, skip_stride, image_size, in_channels):
        depths, mult = [int(d) for d in depths], [int(m) for m in multipliers]
        n = len(depths)
        # The official class builds full lists of 5 (3 levels) or 7 (4 levels) stages; it
        # extends shorter ones in ways its own assertions then refuse (3) or a 4-list to 7.
        if n not in (5, 7) or len(mult) != n:
            raise ValueError(f"depths and multipliers must both have 5 or 7 entries "
                             f"(got {len(depths)} and {len(mult)})")
        L = (n + 1) // 2
        if depths[:L] != depths[L - 1:][::-1] or min(depths) < 1:
            raise ValueError(f"depths {depths} must be positive and mirror-symmetric")
        if min(mult) < 1 or hidden < 1 or skip_stride < 1:
            raise ValueError("hidden, multipliers and skip_stride must be positive")
        if image_size % (1 << (L - 1)):
            raise ValueError(f"image_size {image_size} is not a multiple of 2^{L - 1}")
        W = [hidden * m for m in mult]
        for s in range(1, L):  # Downsample: conv to W/4 channels, then pixel-unshuffle x4
            if W[s] % 4:
                raise ValueError(f"stage {s} width {W[s]} is not a multiple of 4 (pixel-unshuffle)")
        # conditions: cond_ls + cond_ls[1:-1][::-1] + [cond_ls[mult[:L].index(mult[-1])]]
        if mult[-1] not in mult[:L]:
            raise ValueError(f"the last multiplier {mult[-1]} must be one of the first {L}")
        cond = list(range(L)) + list(range(L - 2, 0, -1)) + [mult[:L].index(mult[-1])]
        for s in range(n):  # the block modulation Linears read the stage's own width
            if mult[cond[s]] != mult[s]:
                raise ValueError(f"stage {s} (multiplier {mult[s]}) is conditioned by embedder "
                                 f"{cond[s]} (multiplier {mult[cond[s]]}): they must agree")
        self.hidden, self.depths, self.mult, self.skip_stride = hidden, depths, mult, skip_stride
        self.levels, self.W, self.cond = L, W, cond
        self.lvl = [min(s, n - 1 - s) for s in range(n)]
        self.res = [image_size >> lv for lv in self.lvl]
        self.in_channels = in_channels
        # block (stage, index) -> (input width, output width); decoder blocks with b % stride == 0
        # read [x, skip] concatenated, the skip from the mirrored encoder stage n-1-s.
        self.blocks = []
        for s in range(n):
            for b in range(depths[s]):
                cin = W[s]
                if s >= L and b % skip_stride == 0:
                    cin = W[s] + W[n - 1 - s]
                self.blocks.append((s, b, cin, W[s]))
        for s, b, cin, cout in self.blocks:
            for c in (cin, cout):
                g = gn_groups(c)
                if g < 1 or c % g:
                    raise ValueError(f"stage {s} block {b}: GroupNorm of {c} channels needs "
                                     f"min(32, C/4) >= 1 groups dividing C")

    def pushes(self, s):
        """Encoder stage s: the blocks whose outputs are saved (official: (d-1-b) % stride == 0)."""
        d = self.depths[s]
        return [b for b in range(d) if (d - 1 - b) % self.skip_stride == 0]

    def pops(self, s):
        """Decoder stage s: the blocks that concatenate a saved map (b % stride == 0)."""
        return [b for b in range(self.depths[s]) if b % self.skip_stride == 0]

    def skip_pairs(self):
        """[(decoder stage, block, encoder stage, block)]: the saved maps are popped LIFO, so
        decoder stage s block k*stride reads encoder stage n-1-s block d-1-k*stride."""
        n = len(self.depths)
        stack = [(s, b) for s in range(self.levels - 1) for b in self.pushes(s)]
        out = []
        for s in range(self.levels, n):
            for b in self.pops(s):
                es, eb = stack.pop()
                out.append((s, b, es, eb))
        assert not stack
        return out


# ---------------------------------------------------------------------------------------------
# Modules (names and registration order as the official classes)
# ---------------------------------------------------------------------------------------------

class GroupNorm(nn.Module):
    """dic_models.GroupNorm: F.group_norm with min(32, C // 4) groups, eps 1e-5, affine."""

    def __init__(self, channels, eps=GN_EPS):
        super().__init__()
        self.num_groups = gn_groups(channels)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def layer_norm_2d(x, eps=LN_EPS):
    """dic_models.LayerNorm2d(affine=False): LayerNorm over the channels of each pixel."""
    return F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), eps=eps).permute(0, 3, 1, 2)


def modulate(x, shift, scale):
    """x [B,C,H,W] * (1 + scale[B,C]) + shift[B,C], broadcast over the pixels."""
    return x * (1 + scale[:, :, None, None]) + shift[:, :, None, None]


class UNetBlock(nn.Module):
    """dic_models.UNetBlock as DiC_default builds it (blockconfig 0, affinef 3, actinada 1,
    GELU after both norms, dropout 0, skip_scale 1):
        h = conv0(GELU(norm0(x)));  (gate, scale, shift) = affine(c)
        h = conv1(GELU(norm1(h) * (1 + scale) + shift));  out = gate * h + (skip(x) or x)."""

    def __init__(self, cin, cout, emb):
        super().__init__()
        self.norm0 = GroupNorm(cin)
        self.conv0 = nn.Conv2d(cin, cout, 3, padding=1)
        self.affine = nn.Sequential(nn.SiLU(), nn.Linear(emb, 3 * cout))
        self.norm1 = GroupNorm(cout)
        self.conv1 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, c):
        h = self.conv0(F.gelu(self.norm0(x)))
        gate, scale, shift = self.affine(c).chunk(3, dim=1)
        h = self.conv1(F.gelu(modulate(self.norm1(h), shift, scale)))
        return gate[:, :, None, None] * h + (self.skip(x) if self.skip is not None else x)


class UBlock(nn.Module):
    """dic_models.U_Block: a wrapper whose only child is `conv` (hence `.conv.` in the names)."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv = UNetBlock(cin, cout, cout)

    def forward(self, x, c):
        return self.conv(x, c)


class Stem(nn.Module):
    """dic_models.OverlapPatchEmbed(bias=True): a 3x3 conv, padding 1, on the latent grid."""

    def __init__(self, cin, cout):
        super().__init__()
        self.proj = nn.Conv2d(cin, cout, 3, padding=1, bias=True)

    def forward(self, x):
        return self.proj(x)


class Downsample(nn.Module):
    """conv3x3 (no bias) to W/4 channels, then PixelUnshuffle(2): [B,W/4,2h,2w] -> [B,W,h,w]."""

    def __init__(self, cin, cout):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout // 4, 3, padding=1, bias=False),
                                  nn.PixelUnshuffle(SHUFFLE))

    def forward(self, x):
        return self.body(x)


class Upsample(nn.Module):
    """conv3x3 (no bias) to 4W channels, then PixelShuffle(2): [B,4W,h,w] -> [B,W,2h,2w]."""

    def __init__(self, cin, cout):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout * 4, 3, padding=1, bias=False),
                                  nn.PixelShuffle(SHUFFLE))

    def forward(self, x):
        return self.body(x)


class FinalLayer(nn.Module):
    """dic_models.FinalLayer: (shift, scale) = Linear(SiLU c); out_proj(LN2d(x)(1+scale)+shift).
    out_proj registers before adaLN_modulation (the official order)."""

    def __init__(self, width, cout):
        super().__init__()
        self.out_proj = nn.Conv2d(width, cout, 3, padding=1, bias=True)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 2 * width))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.out_proj(modulate(layer_norm_2d(x), shift, scale))


class DiC(nn.Module):
    def __init__(self, input_size=32, in_channels=4, hidden_size=96, depths=(6, 6, 5, 6, 6),
                 multipliers=tuple(DEFAULT_MULTIPLIERS), skip_stride=DEFAULT_SKIP_STRIDE,
                 class_dropout_prob=CLASS_DROPOUT, num_classes=1000, learn_sigma=True,
                 class_names=None):
        super().__init__()
        if num_classes < 1 or in_channels < 1:
            raise ValueError("num_classes and in_channels must be positive")
        plan = Plan(hidden_size, depths, multipliers, skip_stride, input_size, in_channels)
        self.plan = plan
        self.cfg = dict(hidden=hidden_size, depths=list(plan.depths), multipliers=list(plan.mult),
                        skip_stride=skip_stride, image_size=input_size, in_channels=in_channels,
                        num_classes=num_classes, learn_sigma=learn_sigma,
                        class_names=list(class_names) if class_names else [str(i) for i in range(num_classes)])
        self.in_channels = in_channels
        self.out_channels = in_channels * 2 if learn_sigma else in_channels
        self.skip_stride = skip_stride
        L, W, n = plan.levels, plan.W, len(plan.depths)

        # registration order = official state_dict order
        self.x_embedder = Stem(in_channels, W[0])
        self.t_embedder_ls = nn.ModuleList([TimestepEmbedder(W[i], FREQ_DIM) for i in range(L)])
        self.y_embedder_ls = nn.ModuleList([LabelEmbedder(num_classes, W[i], class_dropout_prob) for i in range(L)])
        self.enc_blocks = nn.ModuleList()
        self.lat_blocks = nn.ModuleList()
        self.dec_blocks = nn.ModuleList()
        self.downs = nn.ModuleList()
        self.ups = nn.ModuleList()
        io = {(s, b): (ci, co) for s, b, ci, co in plan.blocks}

        def stage(s):
            return nn.ModuleList([UBlock(*io[(s, b)]) for b in range(plan.depths[s])])

        for s in range(L - 1):
            self.enc_blocks.append(stage(s))
            self.downs.append(Downsample(W[s], W[s + 1]))
        self.lat_blocks.append(stage(L - 1))
        for s in range(L, n):
            self.ups.append(Upsample(W[s - 1], W[s]))
            self.dec_blocks.append(stage(s))
        self.output = nn.Conv2d(W[-1], W[-1], 3, padding=1, bias=True)
        self.final_layer = FinalLayer(W[-1], self.out_channels)
        initialize_weights(self)

    # ---- configuration ----
    @classmethod
    def from_metadata(cls, meta):
        """Builds the module described by a safetensors __metadata__ map (docs/design.md §7)."""
        if meta.get("backbone", "dit") != "dic":
            raise ValueError(f"metadata backbone {meta.get('backbone', 'dit')!r} is not 'dic'")
        tf = lambda s: {"true": True, "false": False}[s]
        return cls(input_size=int(meta["image_size"]), in_channels=int(meta["in_channels"]),
                   hidden_size=int(meta["hidden"]), depths=json.loads(meta["depths"]),
                   multipliers=json.loads(meta["multipliers"]), skip_stride=int(meta["skip_stride"]),
                   num_classes=int(meta["num_classes"]), learn_sigma=tf(meta["learn_sigma"]),
                   class_names=json.loads(meta.get("class_names", "null")))

    @classmethod
    def from_preset(cls, name, **kw):
        """'DiC-S' etc. (the official DiC_S, DiC_B, DiC_XL, DiC_H, and our DiC-T)."""
        s = name[4:] if name.startswith("DiC-") else name
        if s not in PRESETS:
            raise ValueError(f"unknown DiC preset {name!r} (expected DiC-{{T,S,B,XL,H}})")
        hidden, depths = PRESETS[s]
        return cls(hidden_size=hidden, depths=depths, multipliers=DEFAULT_MULTIPLIERS,
                   skip_stride=DEFAULT_SKIP_STRIDE, **kw)

    def metadata(self):
        c = self.cfg
        arr = lambda v: json.dumps(v, separators=(",", ":"))
        return {"backbone": "dic", "hidden": str(c["hidden"]), "depths": arr(c["depths"]),
                "multipliers": arr(c["multipliers"]), "skip_stride": str(c["skip_stride"]),
                "image_size": str(c["image_size"]), "in_channels": str(c["in_channels"]),
                "num_classes": str(c["num_classes"]),
                "learn_sigma": "true" if c["learn_sigma"] else "false",
                "class_names": arr(c["class_names"])}

    # ---- forward ----
    def drop_labels(self, y):
        """Label dropout, drawn ONCE (as the official stage-0 LabelEmbedder.token_drop does, with
        torch.rand) and the dropped labels shared by every stage's table."""
        emb = self.y_embedder_ls[0]
        if self.training and emb.dropout_prob > 0:
            drop = torch.rand(y.shape[0], device=y.device) < emb.dropout_prob
            y = torch.where(drop, torch.full_like(y, emb.num_classes), y)
        return y

    def forward(self, x, t, y):
        p = self.plan
        L, n = p.levels, len(p.depths)
        x = self.x_embedder(x)
        y = self.drop_labels(y)
        cond = [self.t_embedder_ls[i](t) + self.y_embedder_ls[i](y, False) for i in range(L)]
        c = [cond[p.cond[s]] for s in range(n)]
        saved = []
        for s, blocks in enumerate(self.enc_blocks):
            for b, blk in enumerate(blocks):
                x = blk(x, c[s])
                if (len(blocks) - 1 - b) % self.skip_stride == 0:
                    saved.append(x)
            x = self.downs[s](x)
        for blk in self.lat_blocks[0]:
            x = blk(x, c[L - 1])
        for j, blocks in enumerate(self.dec_blocks):
            s = L + j
            x = self.ups[j](x)
            for b, blk in enumerate(blocks):
                if b % self.skip_stride == 0:
                    x = torch.cat([x, saved.pop()], dim=1)  # [decoder map, saved map]
                x = blk(x, c[s])
        x = self.output(x)
        return self.final_layer(x, c[n - 1])

    def forward_with_cfg(self, x, t, y, cfg_scale):
        """docs/design.md §3 guidance, as tools/ref/ref_dit.py (all C channels; the official code guides 3)."""
        null = torch.full_like(y, self.y_embedder_ls[0].num_classes)
        out = self.forward(torch.cat([x, x]), torch.cat([t, t]), torch.cat([y, null]))
        cond, unc = out.chunk(2, dim=0)
        C = self.in_channels
        eps = unc[:, :C] + cfg_scale * (cond[:, :C] - unc[:, :C])
        return torch.cat([eps, cond[:, C:]], dim=1)


def initialize_weights(model):
    """The official DiC.initialize_weights:
      every nn.Linear and nn.Conv2d: xavier_uniform_ on the weight as PyTorch computes the fans
        (conv [O,I,k,k]: fan_in = I k^2, fan_out = O k^2), bias 0 -- block convs, 1x1 shortcuts,
        down / up convs, `output`, and the blocks' modulation Linears (`affine.1`), which the
        official code means to zero but does not (it looks for `block.adaLN_modulation`, which a
        U_Block lacks, and swallows the AttributeError): block gates start non-zero;
      x_embedder.proj: xavier_uniform on the [O, I k^2] view (fan_out = O), bias 0;
      label tables and t-MLP weights N(0, 0.02) (t-MLP biases stay 0);
      GroupNorm weight 1, bias 0 (its own module, untouched);
      final_layer.adaLN_modulation.1 and final_layer.out_proj: 0 (weight and bias).
    (Same distributions as the official code, not the same random stream.)"""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    w = model.x_embedder.proj.weight.data
    nn.init.xavier_uniform_(w.view(w.shape[0], -1))
    nn.init.zeros_(model.x_embedder.proj.bias)
    for emb in model.y_embedder_ls:
        nn.init.normal_(emb.embedding_table.weight, std=0.02)
    for emb in model.t_embedder_ls:
        nn.init.normal_(emb.mlp[0].weight, std=0.02)
        nn.init.normal_(emb.mlp[2].weight, std=0.02)
    fl = model.final_layer
    for t in (fl.adaLN_modulation[-1].weight, fl.adaLN_modulation[-1].bias, fl.out_proj.weight, fl.out_proj.bias):
        nn.init.zeros_(t)


# ---------------------------------------------------------------------------------------------
# Counts (closed forms, written out independently of the modules; docs/math/dic.md)
# ---------------------------------------------------------------------------------------------

def param_count(hidden, depths, multipliers, skip_stride, in_channels, num_classes, learn_sigma, image_size):
    p = Plan(hidden, depths, multipliers, skip_stride, image_size, in_channels)
    W, L, n = p.W, p.levels, len(p.depths)
    cout = in_channels * (2 if learn_sigma else 1)
    total = 9 * in_channels * W[0] + W[0]                                     # stem
    total += sum(FREQ_DIM * W[i] + W[i] + W[i] * W[i] + W[i] for i in range(L))  # t-MLPs
    total += sum((num_classes + 1) * W[i] for i in range(L))                  # label tables
    for _, _, ci, co in p.blocks:
        total += (2 * ci + 9 * ci * co + co       # norm0, conv0
                  + 3 * co * co + 3 * co          # affine (emb width = co)
                  + 2 * co + 9 * co * co + co)    # norm1, conv1
        if ci != co:
            total += ci * co + co                 # 1x1 shortcut
    total += sum(9 * W[s] * (W[s + 1] // 4) for s in range(L - 1))             # downs
    total += sum(9 * W[s - 1] * 4 * W[s] for s in range(L, n))                 # ups
    total += 9 * W[-1] * W[-1] + W[-1]                                         # output
    total += 9 * W[-1] * cout + cout + 2 * W[-1] * W[-1] + 2 * W[-1]           # final layer
    return total


def flops_per_image(hidden, depths, multipliers, skip_stride, in_channels, learn_sigma, image_size):
    """Forward multiply-adds x 2, counted as dit_flops_per_image counts DiT's: every conv
    (pixels x k^2 x Cin x Cout) and Linear (in x out), the embedders and modulations included;
    no norms, activations, shuffles or additions."""
    p = Plan(hidden, depths, multipliers, skip_stride, image_size, in_channels)
    W, L, n, P = p.W, p.levels, len(p.depths), [r * r for r in p.res]
    cout = in_channels * (2 if learn_sigma else 1)
    mac = P[0] * 9 * in_channels * W[0]                                      # stem
    mac += sum(FREQ_DIM * W[i] + W[i] * W[i] for i in range(L))                # t-MLPs
    for s, _, ci, co in p.blocks:
        mac += P[s] * (9 * ci * co + 9 * co * co + (ci * co if ci != co else 0)) + 3 * co * co
    mac += sum(P[s] * 9 * W[s] * (W[s + 1] // 4) for s in range(L - 1))       # downs (fine grid)
    mac += sum(P[s - 1] * 9 * W[s - 1] * 4 * W[s] for s in range(L, n))       # ups (coarse grid)
    mac += P[-1] * 9 * W[-1] * W[-1] + P[-1] * 9 * W[-1] * cout + 2 * W[-1] * W[-1]
    return 2.0 * mac


def preset_kw(name):
    s = name[4:] if name.startswith("DiC-") else name
    hidden, depths = PRESETS[s]
    return dict(hidden=hidden, depths=depths, multipliers=DEFAULT_MULTIPLIERS, skip_stride=DEFAULT_SKIP_STRIDE)


# ---------------------------------------------------------------------------------------------
# A second implementation from the formulas (what the C side computes), reading a state_dict
# ---------------------------------------------------------------------------------------------

def conv2d_im2col(x, w, b, pad):
    """y[n,o,i,j] = b[o] + sum_{c,a,e} w[o,c,a,e] x[n,c,i+a-pad,j+e-pad] (zero outside), stride 1,
    as a GEMM over the im2col matrix (column index c*k*k + a*k + e = w's flattened layout)."""
    N, C, H, Wd = x.shape
    O, _, k, _ = w.shape
    cols = F.unfold(x, k, padding=pad)                 # [N, C k k, H W]
    y = (w.reshape(O, -1) @ cols).reshape(N, O, H + 2 * pad - k + 1, Wd + 2 * pad - k + 1)
    return y if b is None else y + b[None, :, None, None]


def group_norm_def(x, G, w, b, eps=GN_EPS):
    """Groups of C/G consecutive channels; mean and biased variance over (C/G, H, W)."""
    N, C, H, Wd = x.shape
    g = x.reshape(N, G, -1)
    mu = g.mean(-1, keepdim=True)
    var = ((g - mu) ** 2).mean(-1, keepdim=True)
    return ((g - mu) / torch.sqrt(var + eps)).reshape(N, C, H, Wd) * w[None, :, None, None] + b[None, :, None, None]


def layer_norm_2d_def(x, eps=LN_EPS):
    mu = x.mean(1, keepdim=True)
    var = ((x - mu) ** 2).mean(1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps)


def gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0)))


def silu(x):
    return x / (1 + torch.exp(-x))


def pixel_unshuffle_def(x, r=SHUFFLE):
    """out[n, c r^2 + a r + e, i, j] = x[n, c, i r + a, j r + e]."""
    N, C, H, Wd = x.shape
    return x.reshape(N, C, H // r, r, Wd // r, r).permute(0, 1, 3, 5, 2, 4).reshape(N, C * r * r, H // r, Wd // r)


def pixel_shuffle_def(x, r=SHUFFLE):
    """out[n, c, i r + a, j r + e] = x[n, c r^2 + a r + e, i, j] (the inverse of unshuffle)."""
    N, C, H, Wd = x.shape
    return x.reshape(N, C // (r * r), r, r, H, Wd).permute(0, 1, 4, 2, 5, 3).reshape(N, C // (r * r), H * r, Wd * r)


def timestep_freq(t):
    half = FREQ_DIM // 2
    f = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / half)
    a = t.double()[:, None] * f[None]
    return torch.cat([torch.cos(a), torch.sin(a)], dim=1)


def functional_forward(sd, meta, x, t, y):
    """DiC forward from the state_dict `sd` (name -> tensor) and the metadata alone."""
    hidden = int(meta["hidden"])
    p = Plan(hidden, json.loads(meta["depths"]), json.loads(meta["multipliers"]),
             int(meta["skip_stride"]), int(meta["image_size"]), int(meta["in_channels"]))
    L, n, W = p.levels, len(p.depths), p.W
    lin = lambda v, name: v @ sd[name + ".weight"].T + sd[name + ".bias"]
    cond = []
    for i in range(L):
        te = lin(silu(lin(timestep_freq(t).to(x.dtype), f"t_embedder_ls.{i}.mlp.0")), f"t_embedder_ls.{i}.mlp.2")
        cond.append(te + sd[f"y_embedder_ls.{i}.embedding_table.weight"][y])
    h = conv2d_im2col(x, sd["x_embedder.proj.weight"], sd["x_embedder.proj.bias"], 1)
    saved = []
    for s in range(n):
        if s >= L:
            h = pixel_shuffle_def(conv2d_im2col(h, sd[f"ups.{s - L}.body.0.weight"], None, 1))
        prefix = (f"enc_blocks.{s}" if s < L - 1 else "lat_blocks.0" if s == L - 1 else f"dec_blocks.{s - L}")
        c = cond[p.cond[s]]
        for b in range(p.depths[s]):
            if s >= L and b % p.skip_stride == 0:
                h = torch.cat([h, saved.pop()], dim=1)
            q = f"{prefix}.{b}.conv."
            ci, co = h.shape[1], W[s]
            u = gelu_erf(group_norm_def(h, gn_groups(ci), sd[q + "norm0.weight"], sd[q + "norm0.bias"]))
            u = conv2d_im2col(u, sd[q + "conv0.weight"], sd[q + "conv0.bias"], 1)
            mod = lin(silu(c), q + "affine.1")
            gate, scale, shift = mod[:, :co], mod[:, co:2 * co], mod[:, 2 * co:]
            u = group_norm_def(u, gn_groups(co), sd[q + "norm1.weight"], sd[q + "norm1.bias"])
            u = gelu_erf(u * (1 + scale[:, :, None, None]) + shift[:, :, None, None])
            u = conv2d_im2col(u, sd[q + "conv1.weight"], sd[q + "conv1.bias"], 1)
            r = conv2d_im2col(h, sd[q + "skip.weight"], sd[q + "skip.bias"], 0) if ci != co else h
            h = gate[:, :, None, None] * u + r
            if s < L - 1 and (p.depths[s] - 1 - b) % p.skip_stride == 0:
                saved.append(h)
        if s < L - 1:
            h = pixel_unshuffle_def(conv2d_im2col(h, sd[f"downs.{s}.body.0.weight"], None, 1))
    h = conv2d_im2col(h, sd["output.weight"], sd["output.bias"], 1)
    mod = lin(silu(cond[p.cond[n - 1]]), "final_layer.adaLN_modulation.1")
    shift, scale = mod[:, :W[-1]], mod[:, W[-1]:]
    h = layer_norm_2d_def(h) * (1 + scale[:, :, None, None]) + shift[:, :, None, None]
    return conv2d_im2col(h, sd["final_layer.out_proj.weight"], sd["final_layer.out_proj.bias"], 1)


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------

def fixture_init(model, gen):
    """Random non-zero weights (activations O(1), every gradient non-trivial), rounded to float32:
    convs N(0, 1/fan_in) (variance-preserving), GroupNorm weights 1 + noise, modulation Linears
    N(0, 0.5/sqrt(in)) so gate / scale / shift are O(0.3), label tables N(0, 0.5)."""

    def normal(t, std, mean=0.0):
        t.data.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float64) * std + mean)

    for name, p in model.named_parameters():
        if ".norm" in name and name.endswith("weight"):
            normal(p, 0.2, 1.0)
        elif name.endswith("bias"):
            normal(p, 0.1)
        elif "affine" in name or "adaLN_modulation" in name:
            normal(p, 0.5 / math.sqrt(p.shape[1]))
        elif "embedding_table" in name:
            normal(p, 0.5)
        elif p.dim() == 4:
            normal(p, 1.0 / math.sqrt(p[0].numel()))
        else:  # t-MLP Linears: Xavier-normal
            normal(p, math.sqrt(2.0 / (p.shape[0] + p.shape[1])))
        p.data.copy_(p.data.float().double())


CONFIGS = {
    # 3 levels (8 -> 4 -> 2), widths 6/8/12 (hidden 2, multipliers 3/4/6): 1, 2, 3 groups; skip
    # stride 2 in depth-3 stages (encoder blocks 0 and 2 saved; decoder blocks 0 and 2
    # concatenate, block 1 does not); the concatenating blocks 8+8 -> 8 (4 groups) and 6+6 -> 6
    # (3 groups of 4: one straddles the [x, skip] boundary) with 1x1 shortcuts; a narrowing down
    # (conv 6 -> 2, unshuffle -> 8); 1 channel, learned sigma.
    "t1": dict(kw=dict(hidden_size=2, depths=[3, 2, 1, 2, 3], multipliers=[3, 4, 6, 4, 3], skip_stride=2,
                       input_size=8, in_channels=1, num_classes=3, learn_sigma=True, class_names=["a", "b", "c"]),
               y=[1, 3, 2], t=[0, 500, 999], init="random"),
    # 3 levels on 12 -> 6 -> 3 (odd latent grid), widths 8/8/16: a width-keeping down
    # (conv 8 -> 2, unshuffle -> 8), 2 and 4 groups; skip stride 3 > every depth: one saved
    # map per encoder stage (its last block), one concatenation per decoder stage (block 0).
    # 4 channels, no learned sigma.
    "t2": dict(kw=dict(hidden_size=8, depths=[2, 3, 1, 3, 2], multipliers=[1, 1, 2, 1, 1], skip_stride=3,
                       input_size=12, in_channels=4, num_classes=5, learn_sigma=False,
                       class_names=["zero", "one", "two", "three", "four"]),
               y=[4, 5], t=[999, 123], init="random"),
    # 4 levels (16 -> 8 -> 4 -> 2) with the official class's other code path: the last
    # multiplier (2) differs from the first, so the last stage is conditioned by embedder 1
    # (mult[:4].index(2)) and its concatenation is 8 + 4 channels; width 4 = one group;
    # skip stride 1 (every encoder block saved, every decoder block concatenates).
    "t3": dict(kw=dict(hidden_size=4, depths=[1, 2, 1, 1, 1, 2, 1], multipliers=[1, 2, 2, 3, 2, 2, 2],
                       skip_stride=1, input_size=16, in_channels=2, num_classes=2, learn_sigma=True,
                       class_names=["x", "y"]),
               y=[2, 0], t=[42, 777], init="random"),
    # the official initialisation: zero output, only final_layer.out_proj has a gradient.
    "init": dict(kw=dict(hidden_size=4, depths=[1, 1, 1, 1, 1], multipliers=[1, 2, 2, 2, 1], skip_stride=1,
                         input_size=8, in_channels=1, num_classes=2, learn_sigma=True, class_names=["x", "y"]),
                 y=[0, 2], t=[10, 700], init="official"),
}


def make_fixture(name, spec, outdir, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the official init draws from the global stream
    model = DiC(**spec["kw"]).double()
    if spec["init"] == "random":
        fixture_init(model, gen)
    else:
        for p in model.parameters():
            p.data.copy_(p.data.float().double())
    model.eval()  # no label dropout: labels are given (K = null included)
    B = len(spec["y"])
    C, S = model.in_channels, model.cfg["image_size"]
    x = torch.randn(B, C, S, S, generator=gen, dtype=torch.float64).float().double()
    t = torch.tensor(spec["t"], dtype=torch.float64)
    y = torch.tensor(spec["y"], dtype=torch.int64)
    dout = torch.randn(B, model.out_channels, S, S, generator=gen, dtype=torch.float64).float().double()
    out = model(x, t, y)
    (out * dout).sum().backward()

    tensors = {}
    for pname, p in model.named_parameters():
        tensors[pname] = p.detach().float()
        assert p.grad is not None, pname
        tensors["grad." + pname] = p.grad.float()
    tensors["in.x"] = x.float()
    tensors["in.t"] = t.float()
    tensors["in.y"] = y.to(torch.int32)
    tensors["in.dout"] = dout.float()
    tensors["out"] = out.detach().float()
    path = os.path.join(outdir, f"dic_{name}.safetensors")
    st_io.save(path, tensors, model.metadata())

    gnorms = {k: float(p.grad.norm()) for k, p in model.named_parameters()}
    gmin = min(gnorms, key=gnorms.get)
    gmax = max(gnorms, key=gnorms.get)
    print(f"{path}: {os.path.getsize(path) / 1024:.0f} KiB, {len(gnorms)} tensors, B={B}, "
          f"max|out|={out.abs().max():.3f}, grad norms min {gnorms[gmin]:.3g} ({gmin}) "
          f"max {gnorms[gmax]:.3g} ({gmax})")
    if spec["init"] == "random":
        assert gnorms[gmin] > 1e-3, "every gradient must be non-trivial"
        assert 0.1 < float(out.abs().max()) < 100
    else:
        assert torch.count_nonzero(out) == 0
        assert {k for k, v in gnorms.items() if v != 0} == {"final_layer.out_proj.weight", "final_layer.out_proj.bias"}
    return path


def verify_fixture(path):
    """Reloads the file through st_io into a fresh module (strict) and recomputes out and every
    gradient in float64 with functional_forward, which reads only the state_dict and metadata."""
    sd, meta = st_io.load_state_dict(path)
    m2 = DiC.from_metadata(meta)
    m2.load_state_dict(sd)  # strict
    assert m2.metadata() == meta, "metadata round trip"
    assert [k for k in m2.state_dict()] == [k for k, _ in m2.named_parameters()]
    arrays, _ = st_io.load(path)
    params = {k: v.double().requires_grad_() for k, v in sd.items()}
    x = torch.from_numpy(arrays["in.x"]).double()
    t = torch.from_numpy(arrays["in.t"]).double()
    y = torch.from_numpy(arrays["in.y"]).long()
    dout = torch.from_numpy(arrays["in.dout"]).double()
    out = functional_forward(params, meta, x, t, y)
    (out * dout).sum().backward()
    assert torch.allclose(out.float(), torch.from_numpy(arrays["out"]), rtol=0, atol=1e-6)
    for k, p in params.items():
        g = torch.from_numpy(arrays["grad." + k])
        assert torch.allclose(p.grad.float(), g, rtol=0, atol=1e-6 * max(1.0, float(g.abs().max()))), k


def write_names(path):
    """The official DiC-S state_dict: DiC_S(input_size=32, in_channels=4, num_classes=1000,
    learn_sigma=True)."""
    m = DiC.from_preset("DiC-S", input_size=32, in_channels=4, num_classes=1000, learn_sigma=True)
    sd = m.state_dict()
    total = sum(v.numel() for v in sd.values())
    want = param_count(in_channels=4, num_classes=1000, learn_sigma=True, image_size=32, **preset_kw("DiC-S"))
    assert total == want == 32835752, (total, want)
    with open(path, "w") as f:
        f.write(f"# DiC_S input_size=32 in_channels=4 num_classes=1000 learn_sigma=True: "
                f"{len(sd)} tensors, {total} parameters\n")
        for k, v in sd.items():
            f.write(" ".join([k] + [str(d) for d in v.shape]) + "\n")
    print(f"{path}: {len(sd)} tensors, {total} parameters")
    return total


# ---------------------------------------------------------------------------------------------
# Self-checks
# ---------------------------------------------------------------------------------------------

def count_macs(model, *args):
    """Multiply-adds of every nn.Conv2d and nn.Linear in one forward, by hooks."""
    total = [0]

    def hook(mod, inp, out):
        if isinstance(mod, nn.Conv2d):
            total[0] += out.numel() // out.shape[0] * mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1]
        else:
            total[0] += out.numel() // out.shape[0] * mod.in_features

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model(*args)
    for h in hs:
        h.remove()
    return total[0]


def self_checks():
    torch.manual_seed(0)
    dt = torch.float64

    with torch.no_grad():
        # 1. the primitive definitions equal PyTorch's modules
        x = torch.randn(2, 12, 6, 4, dtype=dt)
        assert torch.equal(pixel_unshuffle_def(x), F.pixel_unshuffle(x, 2))
        assert torch.equal(pixel_shuffle_def(x), F.pixel_shuffle(x, 2))
        assert torch.equal(pixel_shuffle_def(pixel_unshuffle_def(x)), x)
        assert pixel_unshuffle_def(x)[1, 5 * 4 + 1 * 2 + 0, 2, 1] == x[1, 5, 2 * 2 + 1, 1 * 2 + 0]
        w, b = torch.randn(12, dtype=dt), torch.randn(12, dtype=dt)
        for G in (1, 3, 12):
            assert torch.allclose(group_norm_def(x, G, w, b), F.group_norm(x, G, w, b, GN_EPS), atol=1e-12)
        assert torch.allclose(layer_norm_2d_def(x), layer_norm_2d(x), atol=1e-12)
        assert torch.allclose(gelu_erf(x), F.gelu(x), atol=1e-15)
        assert not torch.allclose(gelu_erf(x), F.gelu(x, approximate="tanh"), atol=1e-6)
        for k, pad in ((3, 1), (1, 0)):
            cw, cb = torch.randn(5, 12, k, k, dtype=dt), torch.randn(5, dtype=dt)
            assert torch.allclose(conv2d_im2col(x, cw, cb, pad), F.conv2d(x, cw, cb, padding=pad), atol=1e-12)
        assert [gn_groups(c) for c in (4, 8, 12, 96, 192, 384, 576)] == [1, 2, 3, 24, 32, 32, 32]

        # 2. the plan: DiC-S's skips and conditions as the official forward builds them
        p = Plan(96, [6, 6, 5, 6, 6], [1, 2, 4, 2, 1], 3, 32, 4)
        assert p.cond == [0, 1, 2, 1, 0] and p.res == [32, 16, 8, 16, 32] and p.W == [96, 192, 384, 192, 96]
        assert p.pushes(0) == [2, 5] and p.pops(3) == [0, 3]
        assert p.skip_pairs() == [(3, 0, 1, 5), (3, 3, 1, 2), (4, 0, 0, 5), (4, 3, 0, 2)]
        assert [(s, b, ci) for s, b, ci, co in p.blocks if ci != co] == [(3, 0, 384), (3, 3, 384), (4, 0, 192), (4, 3, 192)]
        assert Plan(4, [1, 2, 1, 1, 1, 2, 1], [1, 2, 3, 4, 3, 2, 2], 1, 16, 1).cond == [0, 1, 2, 3, 2, 1, 1]
        for bad in (dict(depths=[1, 2, 1, 1, 1]), dict(multipliers=[1, 2, 4, 3, 1]),
                    dict(multipliers=[1, 2, 4, 2, 3]), dict(depths=[1, 1, 1]), dict(image_size=10),
                    dict(hidden=5), dict(hidden=132)):
            kw = dict(hidden=8, depths=[1, 1, 1, 1, 1], multipliers=[1, 2, 4, 2, 1], skip_stride=1,
                      image_size=16, in_channels=1)
            kw.update(bad)
            try:
                Plan(**kw)
            except ValueError:
                continue
            raise AssertionError(f"Plan accepted {bad}")

    # 3. gradcheck a tiny model with every feature (down, up, skips, shortcut, 2 groups)
    tiny = DiC(input_size=4, in_channels=1, hidden_size=8, depths=[2, 1, 1, 1, 2], multipliers=[1, 1, 2, 1, 1],
               skip_stride=2, num_classes=2).double()
    fixture_init(tiny, torch.Generator().manual_seed(1))
    tiny.eval()
    xin = torch.randn(2, 1, 4, 4, dtype=dt, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: tiny(a, torch.tensor([3.0, 900.0], dtype=dt), torch.tensor([0, 2])), (xin,))

    with torch.no_grad():
        # 4. official init: zeroed output layers, NOT zeroed block modulations; output exactly 0
        torch.manual_seed(3)
        m = DiC.from_preset("DiC-S", input_size=32, in_channels=4, num_classes=1000).double()
        sd = m.state_dict()
        zero = {k for k, v in sd.items() if torch.count_nonzero(v) == 0}
        biases = {k for k in sd if k.endswith(".bias")}  # norm biases too
        assert zero == biases | {"final_layer.out_proj.weight", "final_layer.adaLN_modulation.1.weight"}, zero ^ biases
        assert all(torch.equal(v, torch.ones_like(v)) for k, v in sd.items() if ".norm" in k and k.endswith("weight"))
        a = sd["enc_blocks.0.0.conv.affine.1.weight"]  # [288, 96]
        bound = math.sqrt(6.0 / (96 + 288))
        assert 0.9 * bound < float(a.abs().max()) <= bound
        c0 = sd["enc_blocks.0.0.conv.conv0.weight"]  # [96, 96, 3, 3]: fans 96*9 each
        assert 0.9 * math.sqrt(6.0 / (2 * 864)) < float(c0.abs().max()) <= math.sqrt(6.0 / (2 * 864))
        st = sd["x_embedder.proj.weight"]  # [96, 4, 3, 3] on the [96, 36] view
        assert 0.9 * math.sqrt(6.0 / 132) < float(st.abs().max()) <= math.sqrt(6.0 / 132)
        assert abs(float(sd["y_embedder_ls.2.embedding_table.weight"].std()) / 0.02 - 1) < 0.02
        assert abs(float(sd["t_embedder_ls.1.mlp.2.weight"].std()) / 0.02 - 1) < 0.05
        xs, ts, ys = torch.randn(2, 4, 32, 32, dtype=dt), torch.tensor([1.0, 500.0], dtype=dt), torch.tensor([3, 1000])
        assert torch.count_nonzero(m(xs, ts, ys)) == 0
        gate = m.enc_blocks[0][0].conv.affine(m.t_embedder_ls[0](ts) + m.y_embedder_ls[0](ys, False))[:, :96]
        assert float(gate.abs().max()) > 1e-3  # blocks are not the identity at init

        # 5. names and order (the official ones, see dic_s_names.txt), counts, FLOPs by hooks
        names = list(sd)
        assert len(names) == 325
        assert names[:7] == ["x_embedder.proj.weight", "x_embedder.proj.bias", "t_embedder_ls.0.mlp.0.weight",
                             "t_embedder_ls.0.mlp.0.bias", "t_embedder_ls.0.mlp.2.weight",
                             "t_embedder_ls.0.mlp.2.bias", "t_embedder_ls.1.mlp.0.weight"]
        assert names[14:20] == ["y_embedder_ls.0.embedding_table.weight", "y_embedder_ls.1.embedding_table.weight",
                                "y_embedder_ls.2.embedding_table.weight", "enc_blocks.0.0.conv.norm0.weight",
                                "enc_blocks.0.0.conv.norm0.bias", "enc_blocks.0.0.conv.conv0.weight"]
        assert names[-10:] == ["downs.0.body.0.weight", "downs.1.body.0.weight", "ups.0.body.0.weight",
                               "ups.1.body.0.weight", "output.weight", "output.bias",
                               "final_layer.out_proj.weight", "final_layer.out_proj.bias",
                               "final_layer.adaLN_modulation.1.weight", "final_layer.adaLN_modulation.1.bias"]
        blk = [k[len("dec_blocks.0.0.conv."):] for k in names if k.startswith("dec_blocks.0.0.")]
        assert blk == ["norm0.weight", "norm0.bias", "conv0.weight", "conv0.bias", "affine.1.weight", "affine.1.bias",
                       "norm1.weight", "norm1.bias", "conv1.weight", "conv1.bias", "skip.weight", "skip.bias"]
        official = {"DiC-S": 32835752, "DiC-B": 129529160, "DiC-XL": 702266120, "DiC-H": 1034516744}
        for pname, want in official.items():
            kw = preset_kw(pname)
            assert param_count(in_channels=4, num_classes=1000, learn_sigma=True, image_size=32, **kw) == want
        for cfg in list(CONFIGS.values()) + [dict(kw=dict(hidden_size=32, depths=PRESETS["T"][1], input_size=32,
                                                          in_channels=1, num_classes=10, learn_sigma=True))]:
            k = dict(cfg["kw"])
            k.pop("class_names", None)
            mm = DiC(**k).double()
            mine = dict(hidden=k["hidden_size"], depths=k["depths"], multipliers=k.get("multipliers", DEFAULT_MULTIPLIERS),
                        skip_stride=k.get("skip_stride", DEFAULT_SKIP_STRIDE), in_channels=k["in_channels"],
                        learn_sigma=k["learn_sigma"], image_size=k["input_size"])
            assert sum(q.numel() for q in mm.parameters()) == param_count(num_classes=k["num_classes"], **mine)
            S, C = k["input_size"], k["in_channels"]
            macs = count_macs(mm, torch.randn(1, C, S, S, dtype=dt), torch.tensor([5.0], dtype=dt), torch.tensor([0]))
            assert 2 * macs == flops_per_image(**mine), (2 * macs, flops_per_image(**mine))
            m2 = DiC.from_metadata(mm.metadata())
            m2.load_state_dict(mm.state_dict())
            assert m2.metadata() == mm.metadata()
        macs = count_macs(m, xs[:1], ts[:1], ys[:1])
        assert 2 * macs == flops_per_image(in_channels=4, learn_sigma=True, image_size=32, **preset_kw("DiC-S"))

        # 6. the module forward == functional_forward on random weights; label dropout is drawn
        #    once and shared (a dropped label reads the null row of every stage's table)
        fixture_init(tiny, torch.Generator().manual_seed(2))
        xs, ts, ys = torch.randn(3, 1, 4, 4, dtype=dt), torch.tensor([5.0, 600.0, 999.0], dtype=dt), torch.tensor([1, 2, 0])
        sd = dict(tiny.state_dict())
        assert torch.allclose(tiny(xs, ts, ys), functional_forward(sd, tiny.metadata(), xs, ts, ys), rtol=0, atol=1e-12)
        tiny.train()
        torch.manual_seed(7)
        got = tiny(xs, ts, ys)
        torch.manual_seed(7)
        drop = torch.rand(3) < CLASS_DROPOUT
        tiny.eval()
        assert torch.equal(got, tiny(xs, ts, torch.where(drop, torch.full_like(ys, 2), ys)))
    print("self-checks passed: pixel (un)shuffle / GroupNorm / LayerNorm2d / erf GELU / im2col conv definitions, "
          "plan (skips, conditions, validation), gradcheck (tiny DiC), official init (what is and is not zeroed, "
          "bounds, zero output), DiC-S names/order, param counts of DiC-S/B/XL/H, FLOPs by hooks, metadata "
          "round trip, module == functional forward, shared label dropout")


def main(argv):
    self_checks()
    if "--check" in argv:
        return
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    outdir = os.path.join(root, "tests", "fixtures")
    os.makedirs(outdir, exist_ok=True)
    for i, (name, spec) in enumerate(CONFIGS.items()):
        verify_fixture(make_fixture(name, spec, outdir, seed=3000 + i))
    write_names(os.path.join(outdir, "dic_s_names.txt"))


if __name__ == "__main__":
    main(sys.argv[1:])
