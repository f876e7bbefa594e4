#!/usr/bin/python3
"""PyTorch reference for mala-dit: DiT (facebookresearch/DiT models.py) with MALA attention.

Follows docs/design.md sections 1 and 2 (which govern where they differ from the upstream
code). Parameter names are the model files' names (docs/design.md §2), so a file this script writes
and a file the C program writes load into the same module (see tools/ref/st_io.py).

Run it (Debian's python, which has torch 1.13):

    /usr/bin/python3 tools/ref/ref_dit.py            # self-checks, then writes tests/fixtures/dit_*.safetensors
    /usr/bin/python3 tools/ref/ref_dit.py --check    # self-checks only

Fixture file tests/fixtures/dit_<name>.safetensors, one per config in CONFIGS:
    <param name>          every parameter (F32, PyTorch layout), pos_embed included
    in.x  [B,C,S,S] F32   input image          in.t [B] F32 timesteps      in.y [B] I32 labels
    in.dout [B,Cout,S,S]  upstream gradient; loss = sum(out * dout)
    out   [B,Cout,S,S]    model(in.x, in.t, in.y)
    grad.<param name>     d loss / d param for every trainable parameter (not pos_embed)
    __metadata__          docs/design.md §2 keys (depth, hidden, heads, patch, image_size,
                          in_channels, num_classes, learn_sigma, rope, gate, lepe, attn, class_names)
Everything is computed in float64 from the float32-rounded stored weights and inputs, then stored
as float32; the weights are random (NOT the adaLN-Zero init) so every gradient is non-trivial.
"""

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

EPS = 1e-6  # MALA / linear-attention denominator epsilon and LayerNorm epsilon


# ---------------------------------------------------------------------------------------------
# Position encodings
# ---------------------------------------------------------------------------------------------

def get_2d_sincos_pos_embed(embed_dim, grid_size):
    """MAE / DiT fixed embedding [T, H] (float64 numpy): first H/2 channels from the column
    index, last H/2 from the row index; each half is [sin(pos*omega), cos(pos*omega)] with
    omega_i = 1/10000^(i/(H/4)), i = 0..H/4-1. Token index = row*grid_size + col."""
    assert embed_dim % 4 == 0
    grid_h = np.arange(grid_size, dtype=np.float64)
    grid_w = np.arange(grid_size, dtype=np.float64)
    grid = np.meshgrid(grid_w, grid_h)  # w goes first, as in MAE
    grid = np.stack(grid, axis=0).reshape([2, 1, grid_size, grid_size])
    emb_h = _sincos_1d(embed_dim // 2, grid[0])  # grid[0] = column index
    emb_w = _sincos_1d(embed_dim // 2, grid[1])  # grid[1] = row index
    return np.concatenate([emb_h, emb_w], axis=1)


def _sincos_1d(embed_dim, pos):
    omega = np.arange(embed_dim // 2, dtype=np.float64) / (embed_dim / 2.0)
    omega = 1.0 / 10000 ** omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def rope_tables(gh, gw, d, dtype=torch.float64, device="cpu"):
    """2-D RoPE sin/cos tables [L, d] for a gh x gw token grid (token l at row l//gw, col l%gw).
    d/4 frequencies w_m = 1/10000^(linspace(0,1,d/4)[m]), each used for two adjacent channels;
    channels [0, d/2) rotate by the row index, [d/2, d) by the column index."""
    assert d % 4 == 0, "RoPE needs head dim divisible by 4"
    angle = 1.0 / (10000 ** torch.linspace(0, 1, d // 4, dtype=torch.float64))
    angle = angle.repeat_interleave(2)  # (d/2)
    l = torch.arange(gh * gw)
    row = (l // gw).to(torch.float64)
    col = (l % gw).to(torch.float64)
    ang = torch.cat([row[:, None] * angle[None], col[:, None] * angle[None]], dim=1)  # (L, d)
    return torch.sin(ang).to(dtype=dtype, device=device), torch.cos(ang).to(dtype=dtype, device=device)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack([-x2, x1], dim=-1).flatten(-2)


def apply_rope(x, sin, cos):
    """Pairs (2i, 2i+1): (a, b) -> (a cos - b sin, b cos + a sin)."""
    return x * cos + rotate_every_two(x) * sin


# ---------------------------------------------------------------------------------------------
# Attention kernels: q, k, v are [B, heads, L, d]; return [B, heads, L, d]
# ---------------------------------------------------------------------------------------------

def phi(x):
    return F.elu(x) + 1.0


def mala_attention(q, k, v, sin=None, cos=None):
    """MALA (docs/design.md §1): out_i = (1 + 1/(z_i+eps)) rope(q'_i) KV - z_i vbar, O(L d^2)."""
    L, d = q.shape[-2], q.shape[-1]
    s = d ** -0.5
    qp, kp = phi(q), phi(k)
    z = s * (qp @ kp.mean(dim=-2, keepdim=True).transpose(-2, -1))  # (B,n,L,1), no RoPE
    if sin is not None:
        qp, kp = apply_rope(qp, sin, cos), apply_rope(kp, sin, cos)
    kv = (s / L) * (kp.transpose(-2, -1) @ v)  # (B,n,d,d)
    return (1.0 + 1.0 / (z + EPS)) * (qp @ kv) - z * v.mean(dim=-2, keepdim=True)


def linear_attention(q, k, v, sin=None, cos=None):
    """Plain linear attention: rope(q'_i) sum_j rope(k'_j) v_j^T / (q'_i . sum_j k'_j + eps)."""
    qp, kp = phi(q), phi(k)
    den = qp @ kp.sum(dim=-2, keepdim=True).transpose(-2, -1) + EPS  # (B,n,L,1), no RoPE
    if sin is not None:
        qp, kp = apply_rope(qp, sin, cos), apply_rope(kp, sin, cos)
    return (qp @ (kp.transpose(-2, -1) @ v)) / den


def softmax_attention(q, k, v, sin=None, cos=None):
    """DiT's attention: softmax(q k^T / sqrt(d)) v, RoPE on raw q, k when asked for."""
    if sin is not None:
        q, k = apply_rope(q, sin, cos), apply_rope(k, sin, cos)
    a = torch.softmax((q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5, dim=-1)
    return a @ v


ATTN_FNS = {"mala": mala_attention, "linear": linear_attention, "softmax": softmax_attention}


def mala_scores(q, k, sin=None, cos=None, eps=EPS):
    """Explicit L x L MALA score matrix (for tests only): beta_i (s/L) q'_i.k'_j - gamma_i."""
    L, d = q.shape[-2], q.shape[-1]
    s = d ** -0.5
    qp, kp = phi(q), phi(k)
    z = s * (qp @ kp.mean(dim=-2, keepdim=True).transpose(-2, -1))
    if sin is not None:
        qp, kp = apply_rope(qp, sin, cos), apply_rope(kp, sin, cos)
    beta = 1.0 + 1.0 / (z + eps)
    gamma = z / L
    return beta * (s / L) * (qp @ kp.transpose(-2, -1)) - gamma


def linear_scores(q, k, sin=None, cos=None):
    qp, kp = phi(q), phi(k)
    den = qp @ kp.sum(dim=-2, keepdim=True).transpose(-2, -1) + EPS
    if sin is not None:
        qp, kp = apply_rope(qp, sin, cos), apply_rope(kp, sin, cos)
    return (qp @ kp.transpose(-2, -1)) / den


# ---------------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------------

def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def layer_norm(x):
    return F.layer_norm(x, (x.shape[-1],), eps=EPS)


class Attention(nn.Module):
    """qkv -> (mala | linear | softmax) [+ RoPE] -> merge heads [+ LePE(v)] [* gate(x)] -> proj."""

    def __init__(self, dim, num_heads, grid, kind="mala", rope=True, lepe=5, gate=False):
        super().__init__()
        assert dim % num_heads == 0 and kind in ATTN_FNS
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        self.grid = grid  # (gh, gw)
        self.kind, self.use_rope = kind, rope
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.lepe = None
        if lepe:
            assert lepe % 2 == 1, "LePE kernel must be odd"
            self.lepe = nn.Conv2d(dim, dim, lepe, padding=lepe // 2, groups=dim, bias=True)
        self.gate = nn.Linear(dim, dim) if gate else None

    def forward(self, x):
        B, L, C = x.shape
        gh, gw = self.grid
        assert L == gh * gw
        qkv = self.qkv(x).reshape(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B, n, L, d)
        sin = cos = None
        if self.use_rope:
            sin, cos = rope_tables(gh, gw, self.head_dim, dtype=x.dtype, device=x.device)
        o = ATTN_FNS[self.kind](q, k, v, sin, cos)
        o = o.transpose(1, 2).reshape(B, L, C)  # channel = head*d + j
        if self.lepe is not None:
            v_img = v.transpose(1, 2).reshape(B, L, C).transpose(1, 2).reshape(B, C, gh, gw)
            o = o + self.lepe(v_img).flatten(2).transpose(1, 2)
        if self.gate is not None:
            o = o * self.gate(x)
        return self.proj(o)


class Mlp(nn.Module):
    """fc1 -> GELU [-> h + dwconv(h) over the token grid] -> fc2; the depthwise conv (kernel
    `dwconv`, 0 = none) is the MALA authors' FeedForwardNetwork 'subconv'."""

    def __init__(self, dim, hidden, grid=None, dwconv=0):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.grid = grid
        self.dwconv = None
        if dwconv:
            assert dwconv % 2 == 1, "FFN depthwise kernel must be odd"
            self.dwconv = nn.Conv2d(hidden, hidden, dwconv, padding=dwconv // 2, groups=hidden, bias=True)

    def forward(self, x):
        h = F.gelu(self.fc1(x), approximate="tanh")
        if self.dwconv is not None:
            h = h + grid_conv(self.dwconv, h, self.grid)
        return self.fc2(h)


def grid_conv(conv, x, grid):
    """A convolution over the token grid of x [B, L, C] (token l at row l // gw, col l % gw)."""
    B, L, C = x.shape
    gh, gw = grid
    img = x.transpose(1, 2).reshape(B, C, gh, gw)
    return conv(img).flatten(2).transpose(1, 2)


class PatchEmbed(nn.Module):
    def __init__(self, patch, in_chans, dim):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, T, H), token = row*gw + col


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden, freq_size=256):
        super().__init__()
        self.freq_size = freq_size
        self.mlp = nn.Sequential(nn.Linear(freq_size, hidden), nn.SiLU(), nn.Linear(hidden, hidden))

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        """[cos(t f_i), sin(t f_i)], f_i = exp(-ln(max_period) i / (dim/2)), i < dim/2."""
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float64) / half)
        args = t.to(torch.float64)[:, None] * freqs[None]
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if dim % 2:
            emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
        return emb

    def forward(self, t):
        dt = self.mlp[0].weight.dtype
        return self.mlp(self.timestep_embedding(t, self.freq_size).to(dt))


class LabelEmbedder(nn.Module):
    """Table of K+1 rows; row K is the null class; labels dropped to K with prob p in training."""

    def __init__(self, num_classes, hidden, dropout_prob):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + 1, hidden)
        self.num_classes, self.dropout_prob = num_classes, dropout_prob

    def forward(self, labels, train, force_drop_ids=None):
        if (train and self.dropout_prob > 0) or force_drop_ids is not None:
            if force_drop_ids is None:
                drop = torch.rand(labels.shape[0], device=labels.device) < self.dropout_prob
            else:
                drop = force_drop_ids == 1
            labels = torch.where(drop, torch.full_like(labels, self.num_classes), labels)
        return self.embedding_table(labels)


class DiTBlock(nn.Module):
    """DiT's block; cpe (kernel, 0 = none) adds the MALA authors' conditional position encoding,
    x = x + pos(x) with a depthwise conv over the token grid, before the attention branch."""

    def __init__(self, hidden, heads, grid, mlp_ratio=4.0, cpe=0, ffn_dwconv=0, **attn_kw):
        super().__init__()
        self.grid = grid
        self.attn = Attention(hidden, heads, grid, **attn_kw)
        self.mlp = Mlp(hidden, int(hidden * mlp_ratio), grid, ffn_dwconv)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 6 * hidden))
        self.pos = None
        if cpe:
            assert cpe % 2 == 1, "CPE kernel must be odd"
            self.pos = nn.Conv2d(hidden, hidden, cpe, padding=cpe // 2, groups=hidden, bias=True)

    def forward(self, x, c):
        if self.pos is not None:
            x = x + grid_conv(self.pos, x, self.grid)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(layer_norm(x), shift_msa, scale_msa))
        x = x + gate_mlp.unsqueeze(1) * self.mlp(modulate(layer_norm(x), shift_mlp, scale_mlp))
        return x


class FinalLayer(nn.Module):
    def __init__(self, hidden, patch, out_channels):
        super().__init__()
        self.linear = nn.Linear(hidden, patch * patch * out_channels)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 2 * hidden))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.linear(modulate(layer_norm(x), shift, scale))


_ATTN_DEFAULTS = {"mala": dict(rope=True, lepe=5, gate=False),
                  "linear": dict(rope=True, lepe=5, gate=False),
                  "softmax": dict(rope=False, lepe=0, gate=False)}


class DiT(nn.Module):
    def __init__(self, input_size=32, patch_size=2, in_channels=4, hidden_size=1152, depth=28,
                 num_heads=16, mlp_ratio=4.0, class_dropout_prob=0.1, num_classes=1000,
                 learn_sigma=True, attn="mala", rope=None, lepe=None, gate=None, class_names=None,
                 cpe=0, ffn_dwconv=0):
        super().__init__()
        dflt = _ATTN_DEFAULTS[attn]
        rope = dflt["rope"] if rope is None else bool(rope)
        lepe = dflt["lepe"] if lepe is None else int(lepe)
        gate = dflt["gate"] if gate is None else bool(gate)
        assert input_size % patch_size == 0
        self.cfg = dict(depth=depth, hidden=hidden_size, heads=num_heads, patch=patch_size,
                        image_size=input_size, in_channels=in_channels, num_classes=num_classes,
                        learn_sigma=learn_sigma, rope=rope, gate=gate, lepe=lepe, attn=attn,
                        cpe=int(cpe), ffn_dwconv=int(ffn_dwconv),
                        class_names=list(class_names) if class_names else [str(i) for i in range(num_classes)])
        self.learn_sigma = learn_sigma
        self.in_channels = in_channels
        self.out_channels = in_channels * 2 if learn_sigma else in_channels
        self.patch_size = patch_size
        self.num_heads = num_heads
        g = input_size // patch_size
        self.grid = (g, g)

        self.x_embedder = PatchEmbed(patch_size, in_channels, hidden_size)
        self.t_embedder = TimestepEmbedder(hidden_size)
        self.y_embedder = LabelEmbedder(num_classes, hidden_size, class_dropout_prob)
        pe = get_2d_sincos_pos_embed(hidden_size, g)
        self.pos_embed = nn.Parameter(torch.from_numpy(pe).float().unsqueeze(0), requires_grad=False)
        self.blocks = nn.ModuleList([
            DiTBlock(hidden_size, num_heads, self.grid, mlp_ratio, cpe=cpe, ffn_dwconv=ffn_dwconv, kind=attn,
                     rope=rope, lepe=lepe, gate=gate)
            for _ in range(depth)])
        self.final_layer = FinalLayer(hidden_size, patch_size, self.out_channels)
        initialize_weights(self)

    @classmethod
    def from_metadata(cls, meta):
        """Builds the module described by a safetensors __metadata__ map (docs/design.md §2)."""
        tf = lambda s: {"true": True, "false": False}[s]
        return cls(input_size=int(meta["image_size"]), patch_size=int(meta["patch"]),
                   in_channels=int(meta["in_channels"]), hidden_size=int(meta["hidden"]),
                   depth=int(meta["depth"]), num_heads=int(meta["heads"]),
                   num_classes=int(meta["num_classes"]), learn_sigma=tf(meta["learn_sigma"]),
                   attn=meta["attn"], rope=tf(meta["rope"]), lepe=int(meta["lepe"]),
                   gate=tf(meta["gate"]), class_names=json.loads(meta.get("class_names", "null")),
                   cpe=int(meta.get("cpe", 0)), ffn_dwconv=int(meta.get("ffn_dwconv", 0)))

    def metadata(self):
        c = self.cfg
        s = lambda v: ("true" if v else "false") if isinstance(v, bool) else str(v)
        m = {k: s(c[k]) for k in ("depth", "hidden", "heads", "patch", "image_size", "in_channels",
                                  "num_classes", "learn_sigma", "rope", "gate", "lepe", "attn")}
        m["class_names"] = json.dumps(c["class_names"], separators=(",", ":"))
        for k in ("cpe", "ffn_dwconv"):  # written only when on, as the C program does
            if c[k]:
                m[k] = str(c[k])
        return m

    def unpatchify(self, x):
        """(N, T, p*p*c) -> (N, c, H, W); the patch vector is ordered (p_row, p_col, c)."""
        c, p = self.out_channels, self.patch_size
        h = w = int(x.shape[1] ** 0.5)
        assert h * w == x.shape[1]
        x = x.reshape(x.shape[0], h, w, p, p, c)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(x.shape[0], c, h * p, w * p)

    def forward(self, x, t, y):
        x = self.x_embedder(x) + self.pos_embed.to(x.dtype)
        c = self.t_embedder(t) + self.y_embedder(y, self.training)
        for block in self.blocks:
            x = block(x, c)
        return self.unpatchify(self.final_layer(x, c))

    def forward_with_cfg(self, x, t, y, cfg_scale):
        """docs/design.md §3 guidance: eps = eps_u + w (eps_c - eps_u) on all C image channels; variance
        channels from the conditional half (not DiT's 3-channel shortcut)."""
        null = torch.full_like(y, self.y_embedder.num_classes)
        out = self.forward(torch.cat([x, x]), torch.cat([t, t]), torch.cat([y, null]))
        cond, unc = out.chunk(2, dim=0)
        C = self.in_channels
        eps = unc[:, :C] + cfg_scale * (cond[:, :C] - unc[:, :C])
        return torch.cat([eps, cond[:, C:]], dim=1)


def initialize_weights(model):
    """docs/design.md §2 initialisation (DiT's adaLN-Zero): Xavier-uniform Linears, zero bias; patch conv
    Xavier on its flattened weight, zero bias; label table and both t-MLP weights N(0, 0.02);
    zero adaLN output layers and final Linear; LePE keeps PyTorch's default conv init; gate is
    Xavier like every Linear; CPE and the FFN's dwconv N(0, 0.02) with zero bias, as the MALA authors'
    _init_weights (its trunc_normal bounds, +-2, are 100 std away); pos_embed the fixed sin-cos table."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    g = model.grid[0]
    pe = get_2d_sincos_pos_embed(model.pos_embed.shape[-1], g)
    model.pos_embed.data.copy_(torch.from_numpy(pe).unsqueeze(0))
    w = model.x_embedder.proj.weight.data
    nn.init.xavier_uniform_(w.view(w.shape[0], -1))
    nn.init.zeros_(model.x_embedder.proj.bias)
    nn.init.normal_(model.y_embedder.embedding_table.weight, std=0.02)
    nn.init.normal_(model.t_embedder.mlp[0].weight, std=0.02)
    nn.init.normal_(model.t_embedder.mlp[2].weight, std=0.02)
    for blk in model.blocks:
        # the MALA authors' convs keep their init (trunc_normal std 0.02, zero bias)
        for conv in (blk.pos, blk.mlp.dwconv):
            if conv is not None:
                nn.init.normal_(conv.weight, std=0.02)
                nn.init.zeros_(conv.bias)
        nn.init.zeros_(blk.adaLN_modulation[-1].weight)
        nn.init.zeros_(blk.adaLN_modulation[-1].bias)
    nn.init.zeros_(model.final_layer.adaLN_modulation[-1].weight)
    nn.init.zeros_(model.final_layer.adaLN_modulation[-1].bias)
    nn.init.zeros_(model.final_layer.linear.weight)
    nn.init.zeros_(model.final_layer.linear.bias)


def fixture_init(model, gen):
    """Random non-zero weights for test fixtures (activations O(1), every gradient non-trivial);
    values rounded to float32 so the stored weights are exactly the ones used."""
    H = model.cfg["hidden"]

    def normal(t, std):
        t.data.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float64) * std)

    for name, p in model.named_parameters():
        if name == "pos_embed":
            continue
        if name.endswith("bias"):
            normal(p, 0.1)
        elif "adaLN_modulation" in name:
            normal(p, 0.5 / math.sqrt(H))
        elif name == "y_embedder.embedding_table.weight":
            normal(p, 0.5)
        elif name.endswith("attn.lepe.weight") or name.endswith(".pos.weight") or name.endswith("mlp.dwconv.weight"):
            normal(p, 0.6 / p.shape[-1])
        else:  # Linear / patch conv: Xavier-normal on the flattened [out, in] weight
            fan_out, fan_in = p.shape[0], p[0].numel()
            normal(p, math.sqrt(2.0 / (fan_in + fan_out)))
        p.data.copy_(p.data.float().double())
    model.pos_embed.data.copy_(model.pos_embed.data.float().double())


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------

CONFIGS = {
    # name: model kwargs, batch labels, timesteps
    "mala_full": dict(kw=dict(depth=2, hidden_size=32, num_heads=2, patch_size=2, input_size=8,
                              in_channels=1, num_classes=3, learn_sigma=True, attn="mala",
                              rope=True, lepe=5, gate=True, class_names=["a", "b", "c"]),
                      y=[1, 3, 1], t=[0, 500, 999]),
    "mala_plain": dict(kw=dict(depth=2, hidden_size=32, num_heads=2, patch_size=2, input_size=12,
                               in_channels=3, num_classes=3, learn_sigma=True, attn="mala",
                               rope=False, lepe=0, gate=False, class_names=["cat", "dog", "owl"]),
                       y=[0, 3, 2], t=[17, 999, 250]),
    "softmax": dict(kw=dict(depth=2, hidden_size=32, num_heads=2, patch_size=4, input_size=16,
                            in_channels=3, num_classes=3, learn_sigma=True, attn="softmax",
                            rope=False, lepe=0, gate=False, class_names=["a", "b", "c"]),
                    y=[2, 3, 2], t=[999, 1, 640]),
    "linear": dict(kw=dict(depth=2, hidden_size=32, num_heads=2, patch_size=2, input_size=8,
                           in_channels=1, num_classes=3, learn_sigma=False, attn="linear",
                           rope=True, lepe=3, gate=False, class_names=["a", "b", "c"]),
                   y=[3, 0], t=[333, 42]),
    # "rect" as in Rectifying (the paper): 3 heads, depth 3, 4 latent-like channels, a 3x3 grid
    # smaller than the 5x5 LePE kernel, head dim 8 (two RoPE frequencies).
    "mala_rect": dict(kw=dict(depth=3, hidden_size=24, num_heads=3, patch_size=4, input_size=12,
                              in_channels=4, num_classes=5, learn_sigma=True, attn="mala",
                              rope=True, lepe=5, gate=True,
                              class_names=["zero", "one", "two", "three", "four"]),
                      y=[4, 5, 0], t=[999, 0, 123]),
    # --attn mala-authors: every part of the MALA authors' block (gate, CPE 3, FFN dwconv 3) on a
    # 4x4 token grid, so the 3x3 convs see both borders and an interior
    "mala_authors": dict(kw=dict(depth=2, hidden_size=32, num_heads=2, patch_size=2, input_size=8,
                                 in_channels=2, num_classes=3, learn_sigma=True, attn="mala",
                                 rope=True, lepe=5, gate=True, cpe=3, ffn_dwconv=3,
                                 class_names=["a", "b", "c"]),
                         y=[2, 3], t=[700, 5]),
}


def make_fixture(name, spec, outdir, seed):
    gen = torch.Generator().manual_seed(seed)
    model = DiT(**spec["kw"]).double()
    fixture_init(model, gen)
    model.eval()  # no label dropout: labels are given (K = null included)
    B = len(spec["y"])
    C, S = model.in_channels, model.cfg["image_size"]
    x = torch.randn(B, C, S, S, generator=gen, dtype=torch.float64).float().double()
    t = torch.tensor(spec["t"], dtype=torch.float64)
    y = torch.tensor(spec["y"], dtype=torch.int64)
    dout = torch.randn(B, model.out_channels, S, S, generator=gen, dtype=torch.float64).float().double()
    out = model(x, t, y)
    loss = (out * dout).sum()
    loss.backward()

    tensors = {}
    for pname, p in model.named_parameters():
        tensors[pname] = p.detach().float()
        if p.requires_grad:
            assert p.grad is not None, pname
            tensors["grad." + pname] = p.grad.float()
    tensors["in.x"] = x.float()
    tensors["in.t"] = t.float()
    tensors["in.y"] = y.to(torch.int32)
    tensors["in.dout"] = dout.float()
    tensors["out"] = out.detach().float()
    path = os.path.join(outdir, f"dit_{name}.safetensors")
    st_io.save(path, tensors, model.metadata())

    gnorms = {k: float(p.grad.norm()) for k, p in model.named_parameters() if p.requires_grad}
    gmin = min(gnorms, key=gnorms.get)
    gmax = max(gnorms, key=gnorms.get)
    print(f"{path}: {os.path.getsize(path) / 1024:.0f} KiB, B={B}, max|out|={out.abs().max():.3f}, "
          f"grad norms min {gnorms[gmin]:.3g} ({gmin}) max {gnorms[gmax]:.3g} ({gmax})")
    return path, model


def verify_fixture(path, model):
    """Reloads the file through st_io into a fresh module and recomputes out/grads (float64)."""
    sd, meta = st_io.load_state_dict(path)
    m2 = DiT.from_metadata(meta)
    m2.load_state_dict(sd)
    assert m2.metadata() == meta, "metadata round trip"
    m2 = m2.double().eval()
    arrays, _ = st_io.load(path)
    x = torch.from_numpy(arrays["in.x"]).double()
    t = torch.from_numpy(arrays["in.t"]).double()
    y = torch.from_numpy(arrays["in.y"]).long()
    dout = torch.from_numpy(arrays["in.dout"]).double()
    out = m2(x, t, y)
    (out * dout).sum().backward()
    assert torch.allclose(out.float(), torch.from_numpy(arrays["out"]), rtol=0, atol=1e-6)
    for k, p in m2.named_parameters():
        if p.requires_grad:
            g = torch.from_numpy(arrays["grad." + k])
            assert torch.allclose(p.grad.float(), g, rtol=0, atol=1e-6), k


# ---------------------------------------------------------------------------------------------
# Self-checks
# ---------------------------------------------------------------------------------------------

def self_checks():
    torch.manual_seed(0)
    dt = torch.float64
    B, n, gh, gw, d = 1, 2, 2, 3, 8
    L = gh * gw
    q, k, v = (torch.randn(B, n, L, d, dtype=dt, requires_grad=True) for _ in range(3))
    sin, cos = rope_tables(gh, gw, d)

    # 1. gradcheck every attention kernel, with and without RoPE
    for name, fn in ATTN_FNS.items():
        for rope in (False, True):
            args = (sin, cos) if rope else (None, None)
            ok = torch.autograd.gradcheck(lambda a, b, c: fn(a, b, c, *args), (q, k, v))
            assert ok, (name, rope)
    # gradcheck the Attention module (LePE + gate + RoPE), input and weights
    for kind in ATTN_FNS:
        att = Attention(16, 2, (2, 3), kind=kind, rope=True, lepe=3, gate=True).double()
        xin = torch.randn(2, 6, 16, dtype=dt, requires_grad=True)
        assert torch.autograd.gradcheck(att, (xin,)), kind
    # gradcheck a tiny full model w.r.t. its input
    tiny = DiT(input_size=4, patch_size=2, in_channels=1, hidden_size=16, depth=1, num_heads=2,
               num_classes=2, attn="mala", rope=True, lepe=3, gate=True, cpe=3, ffn_dwconv=3).double()
    fixture_init(tiny, torch.Generator().manual_seed(1))
    tiny.eval()  # no label dropout
    xin = torch.randn(2, 1, 4, 4, dtype=dt, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: tiny(a, torch.tensor([3.0, 900.0], dtype=dt),
                                                   torch.tensor([0, 2])), (xin,))

    with torch.no_grad():
        # 2. MALA without RoPE: explicit score rows sum to 1 (exactly with eps = 0); the O(L d^2)
        #    form equals scores @ v, with and without RoPE
        A0 = mala_scores(q, k, eps=0.0)
        assert torch.allclose(A0.sum(-1), torch.ones_like(A0.sum(-1)), atol=1e-12, rtol=0)
        A = mala_scores(q, k)
        assert torch.allclose(A.sum(-1), torch.ones_like(A.sum(-1)), atol=1e-5, rtol=0)
        assert torch.allclose(A @ v, mala_attention(q, k, v), atol=1e-12)
        Ar = mala_scores(q, k, sin, cos)
        assert torch.allclose(Ar @ v, mala_attention(q, k, v, sin, cos), atol=1e-12)
        assert torch.allclose(linear_scores(q, k, sin, cos) @ v, linear_attention(q, k, v, sin, cos), atol=1e-12)
        Al = linear_scores(q, k)
        assert torch.allclose(Al.sum(-1), torch.ones_like(Al.sum(-1)), atol=1e-5)

        # 3. scaling q' by a > 1 sharpens MALA, leaves linear attention unchanged
        a = 3.0  # scale the feature q' = phi(q) directly (the paper's argument)
        s = d ** -0.5
        qp, kp = phi(q), phi(k)

        def mala_from(qp_):
            z = s * (qp_ @ kp.mean(-2, keepdim=True).transpose(-2, -1))
            return (1 + 1 / z) * (s / L) * (qp_ @ kp.transpose(-2, -1)) - z / L

        def lin_from(qp_):
            return (qp_ @ kp.transpose(-2, -1)) / (qp_ @ kp.sum(-2, keepdim=True).transpose(-2, -1))

        spread = lambda M: (M.max(-1).values - M.min(-1).values)
        assert torch.all(spread(mala_from(a * qp)) > spread(mala_from(qp)))
        assert torch.allclose(lin_from(a * qp), lin_from(qp), atol=1e-12)

        # 4. RoPE: relative (dot products depend only on position offsets along each axis)
        x1 = torch.randn(d, dtype=dt)
        x2 = torch.randn(d, dtype=dt)
        s2, c2 = rope_tables(4, 4, d)
        dot = lambda i, j: float((apply_rope(x1, s2[i], c2[i]) * apply_rope(x2, s2[j], c2[j])).sum())
        assert abs(dot(0, 5) - dot(5, 10)) < 1e-12 and abs(dot(1, 4) - dot(6, 9)) < 1e-12
        # first pair rotates by the row index with w_0 = 1
        r = apply_rope(torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 0], dtype=dt), s2[4 * 2 + 1], c2[4 * 2 + 1])
        assert abs(r[0] - math.cos(2)) < 1e-12 and abs(r[1] - math.sin(2)) < 1e-12
        # pair d/2 rotates by the column index
        e = torch.zeros(d, dtype=dt); e[d // 2] = 1
        r = apply_rope(e, s2[4 * 2 + 1], c2[4 * 2 + 1])
        assert abs(r[d // 2] - math.cos(1)) < 1e-12 and abs(r[d // 2 + 1] - math.sin(1)) < 1e-12

        # 5. pos_embed layout: first H/2 channels from the column, [sin, cos], omega_i = 1e4^(-i/(H/4))
        Hd, g = 16, 3
        pe = get_2d_sincos_pos_embed(Hd, g)
        for l in range(g * g):
            row, col = divmod(l, g)
            for i in range(Hd // 4):
                om = 1.0 / 10000 ** (i / (Hd / 4))
                assert abs(pe[l, i] - math.sin(col * om)) < 1e-12
                assert abs(pe[l, Hd // 4 + i] - math.cos(col * om)) < 1e-12
                assert abs(pe[l, Hd // 2 + i] - math.sin(row * om)) < 1e-12
                assert abs(pe[l, 3 * Hd // 4 + i] - math.cos(row * om)) < 1e-12

        # 6. unpatchify: out[n, c, hp*p + i, wp*p + j] = tok[n, hp*gw + wp, (i*p + j)*C + c]
        m = DiT(input_size=6, patch_size=3, in_channels=2, hidden_size=8, depth=1, num_heads=2,
                num_classes=2, learn_sigma=False, attn="softmax")
        tok = torch.randn(1, 4, 3 * 3 * 2, dtype=dt)
        img = m.unpatchify(tok)
        for c in range(2):
            for Y in range(6):
                for X in range(6):
                    hp, i = divmod(Y, 3)
                    wp, j = divmod(X, 3)
                    assert img[0, c, Y, X] == tok[0, hp * 2 + wp, (i * 3 + j) * 2 + c]

        # 7. timestep embedding = [cos, sin]
        te = TimestepEmbedder.timestep_embedding(torch.tensor([7.0]), 8)
        assert abs(te[0, 0] - math.cos(7)) < 1e-12 and abs(te[0, 4] - math.sin(7)) < 1e-12
        assert abs(te[0, 1] - math.cos(7 * math.exp(-math.log(10000) / 4))) < 1e-12

        # 8. the design's init (docs/design.md §2): adaLN-Zero means the network output is exactly zero at init
        m = DiT(input_size=8, patch_size=2, in_channels=1, hidden_size=16, depth=2, num_heads=2,
                num_classes=3, attn="mala", gate=True).double()
        o = m(torch.randn(2, 1, 8, 8, dtype=dt), torch.tensor([1.0, 2.0], dtype=dt), torch.tensor([0, 3]))
        assert torch.count_nonzero(o) == 0
        names = set(m.state_dict())
        for want in ("x_embedder.proj.weight", "pos_embed", "t_embedder.mlp.0.weight",
                     "t_embedder.mlp.2.bias", "y_embedder.embedding_table.weight",
                     "blocks.1.attn.qkv.weight", "blocks.1.attn.proj.bias", "blocks.0.attn.lepe.weight",
                     "blocks.0.attn.gate.weight", "blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc2.bias",
                     "blocks.0.adaLN_modulation.1.weight", "final_layer.linear.weight",
                     "final_layer.adaLN_modulation.1.bias"):
            assert want in names, want
        assert m.state_dict()["blocks.0.attn.lepe.weight"].shape == (16, 1, 5, 5)

    # 9. st_io round trip of all dtypes it writes
    import tempfile
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "a.safetensors")
        ts = {"b": np.arange(3, dtype=np.int32), "a": np.ones((2, 3), np.float32),
              "c": np.array(2.5, np.float64), "d": np.zeros((0, 4), np.float32)}
        st_io.save(p, ts, {"k": "v"})
        blob = open(p, "rb").read()
        hl = int.from_bytes(blob[:8], "little")
        assert (8 + hl) % 8 == 0
        back, meta = st_io.load(p)
        assert meta == {"k": "v"} and sorted(back) == sorted(ts)
        for kk in ts:
            assert back[kk].dtype == ts[kk].dtype and np.array_equal(back[kk], ts[kk])
    print("self-checks passed: gradcheck (mala/linear/softmax kernels +-RoPE, Attention module, "
          "tiny DiT), MALA rows sum to 1, explicit == fast forms, sharpness, RoPE, pos_embed, "
          "unpatchify, t-embedding, adaLN-Zero init, st_io round trip")


def main(argv):
    self_checks()
    if "--check" in argv:
        return
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    outdir = os.path.join(root, "tests", "fixtures")
    os.makedirs(outdir, exist_ok=True)
    for i, (name, spec) in enumerate(CONFIGS.items()):
        path, model = make_fixture(name, spec, outdir, seed=1000 + i)
        verify_fixture(path, model)


if __name__ == "__main__":
    main(sys.argv[1:])
