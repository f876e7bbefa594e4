#!/usr/bin/python3
"""Writes the FID Inception-v3 / FID / IS test fixtures (run with /usr/bin/python3: torch 1.13,
torchvision 0.14, numpy, scipy).

    /usr/bin/python3 tools/ref/make_inception_fixtures.py [--out tests/fixtures] [--threads 2]

The real weights (pt_inception-2015-12-05-6726825d.pth, 91 MiB) cannot be downloaded here and a
random-weight copy is as large, so nothing that big is committed. Instead every weight comes from a
small counter-based generator that this file and eval/inception.c implement identically:

    seed   = FNV-1a 64 of the tensor name ("Mixed_6b.branch7x7_2.conv.weight")
    z_i    = splitmix64 finaliser of seed + (i + 1) * 0x9E3779B97F4A7C15   (i = logical index,
             row-major over the tensor's shape as PyTorch reports it, e.g. OIHW)
    u_i    = (z_i >> 40) * 2^-24                                            (exact in float32)
    w_i    = float32(lo + (hi - lo) * u_i)      computed in float64, [lo, hi) chosen by tensor kind

This script builds torchvision's Inception3 with pytorch-fid's FID blocks, fills all 472 tensors from
the generator, saves them with torch.save(..., _use_new_zipfile_serialization=False) into a temporary
directory -- conv weights as OIHW views of HWIO storage and fc.weight as a transposed view, as in the
real file -- loads that file back with torch.load exactly as pytorch-fid does, and records pool3
features and 1008-way logits (pool3 . fc.weight^T, no bias) for a few images. The C test regenerates
the same weights, writes them in the same legacy format with formats/torch_legacy.c (whose writer is
checked byte for byte against incep_small.pth, written here by torch), loads that file with the real
loader and compares.

Files written (all small):
    incep_ref.npz      images (uint8, NCHW, per group g0..g4) and their pool3 / logits (float32)
    incep_names.txt    the 472 "name shape..." lines of the FID Inception state dict, in order
    incep_small.pth    a few real-shaped tensors saved by torch (legacy format, HWIO conv storage)
    incep_meta.pth     a module state_dict() with _metadata, num_batches_tracked, a storage-offset
                       view, two tensors sharing a storage and a float64 tensor
    fid_ref.txt        FID values (scipy.linalg.sqrtm as pytorch-fid does, and an eigh check) for
                       generator-made features; IS mean/std for generator-made logits
"""
import argparse
import collections
import os
import sys
import tempfile

import numpy as np
import scipy.linalg
import torch
import torch.nn.functional as F
import torchvision
from torchvision.models.inception import InceptionA, InceptionC, InceptionE

M64 = (1 << 64) - 1


# ---------------------------------------------------------------------------------------------
# The shared generator (eval/inception.c: inc_gen_uniform)
# ---------------------------------------------------------------------------------------------
def fnv1a64(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h ^= b
        h = (h * 0x100000001b3) & M64
    return h


def gen_uniform(name, n, lo, hi):
    """float64 values lo + (hi - lo) * u_i, i = 0..n-1 (cast to float32 by the caller)."""
    seed = np.uint64(fnv1a64(name))
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = seed + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) * (2.0 ** -24)
    return lo + (hi - lo) * u


def weight_range(name, shape):
    """[lo, hi) of the random FID Inception weights; eval/inception.c: inc_random_range."""
    if name.endswith("conv.weight"):
        fan_in = shape[1] * shape[2] * shape[3]
        a = (6.0 / fan_in) ** 0.5  # He-uniform: keeps ReLU activations O(1)
        return -a, a
    if name.endswith("bn.weight"):
        return 0.9, 1.3
    if name.endswith("bn.bias"):
        return -0.1, 0.1
    if name.endswith("bn.running_mean"):
        return -0.1, 0.1
    if name.endswith("bn.running_var"):
        return 0.8, 1.25
    if name == "fc.weight":
        a = (3.0 / shape[1]) ** 0.5
        return -a, a
    if name == "fc.bias":
        return -0.1, 0.1
    raise ValueError(name)


def gen_tensor(name, shape):
    lo, hi = weight_range(name, shape)
    n = int(np.prod(shape))
    return gen_uniform(name, n, lo, hi).astype(np.float32).reshape(shape)


# ---------------------------------------------------------------------------------------------
# pytorch-fid's FID Inception (pytorch_fid/inception.py), rebuilt on torchvision's Inception3
# ---------------------------------------------------------------------------------------------
class FIDInceptionA(InceptionA):
    def forward(self, x):
        branch1x1 = self.branch1x1(x)
        branch5x5 = self.branch5x5_2(self.branch5x5_1(x))
        branch3x3dbl = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        # TensorFlow's average pool does not count the padded zeros
        branch_pool = F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)
        branch_pool = self.branch_pool(branch_pool)
        return torch.cat([branch1x1, branch5x5, branch3x3dbl, branch_pool], 1)


class FIDInceptionC(InceptionC):
    def forward(self, x):
        branch1x1 = self.branch1x1(x)
        branch7x7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        b = self.branch7x7dbl_1(x)
        b = self.branch7x7dbl_2(b)
        b = self.branch7x7dbl_3(b)
        b = self.branch7x7dbl_4(b)
        branch7x7dbl = self.branch7x7dbl_5(b)
        branch_pool = F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)
        branch_pool = self.branch_pool(branch_pool)
        return torch.cat([branch1x1, branch7x7, branch7x7dbl, branch_pool], 1)


class FIDInceptionE_1(InceptionE):
    def forward(self, x):
        branch1x1 = self.branch1x1(x)
        b = self.branch3x3_1(x)
        branch3x3 = torch.cat([self.branch3x3_2a(b), self.branch3x3_2b(b)], 1)
        b = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        branch3x3dbl = torch.cat([self.branch3x3dbl_3a(b), self.branch3x3dbl_3b(b)], 1)
        branch_pool = F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)
        branch_pool = self.branch_pool(branch_pool)
        return torch.cat([branch1x1, branch3x3, branch3x3dbl, branch_pool], 1)


class FIDInceptionE_2(InceptionE):
    def forward(self, x):
        branch1x1 = self.branch1x1(x)
        b = self.branch3x3_1(x)
        branch3x3 = torch.cat([self.branch3x3_2a(b), self.branch3x3_2b(b)], 1)
        b = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        branch3x3dbl = torch.cat([self.branch3x3dbl_3a(b), self.branch3x3dbl_3b(b)], 1)
        # the FID Inception's last block uses max pooling here
        branch_pool = F.max_pool2d(x, kernel_size=3, stride=1, padding=1)
        branch_pool = self.branch_pool(branch_pool)
        return torch.cat([branch1x1, branch3x3, branch3x3dbl, branch_pool], 1)


def fid_inception_v3():
    inception = torchvision.models.inception_v3(num_classes=1008, aux_logits=False, init_weights=False)
    inception.Mixed_5b = FIDInceptionA(192, pool_features=32)
    inception.Mixed_5c = FIDInceptionA(256, pool_features=64)
    inception.Mixed_5d = FIDInceptionA(288, pool_features=64)
    inception.Mixed_6b = FIDInceptionC(768, channels_7x7=128)
    inception.Mixed_6c = FIDInceptionC(768, channels_7x7=160)
    inception.Mixed_6d = FIDInceptionC(768, channels_7x7=160)
    inception.Mixed_6e = FIDInceptionC(768, channels_7x7=192)
    inception.Mixed_7b = FIDInceptionE_1(1280)
    inception.Mixed_7c = FIDInceptionE_2(2048)
    return inception.eval()


@torch.no_grad()
def fid_forward(m, x):
    """pytorch-fid's InceptionV3 (resize_input=True, normalize_input=True, output block 3) plus
    the IS logits. x: [N, 3, H, W] in [0, 1]."""
    x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
    x = 2 * x - 1
    x = m.Conv2d_1a_3x3(x)
    x = m.Conv2d_2a_3x3(x)
    x = m.Conv2d_2b_3x3(x)
    x = F.max_pool2d(x, kernel_size=3, stride=2)
    x = m.Conv2d_3b_1x1(x)
    x = m.Conv2d_4a_3x3(x)
    x = F.max_pool2d(x, kernel_size=3, stride=2)
    for blk in ("Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c",
                "Mixed_6d", "Mixed_6e", "Mixed_7a", "Mixed_7b", "Mixed_7c"):
        x = getattr(m, blk)(x)
    pool3 = F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)
    logits = pool3 @ m.fc.weight.t()
    return pool3, logits


def state_names(model):
    """(name, shape) of the FID Inception state dict as the real file holds it (472 tensors:
    no num_batches_tracked)."""
    return [(k, tuple(v.shape)) for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")]


def stored_like_real_file(name, arr):
    """A tensor with the real file's storage order: conv OIHW over HWIO storage, fc.weight over
    its transpose (TensorFlow layout); others contiguous."""
    t = torch.from_numpy(arr)
    if t.dim() == 4:
        return t.permute(2, 3, 1, 0).contiguous().permute(3, 2, 0, 1)
    if name == "fc.weight":
        return t.t().contiguous().t()
    return t.clone()


# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------
GROUPS = [  # name, N, C, H, W  (eval test: tests/test_inception.c uses the same list)
    ("g0", 2, 1, 28, 28),
    ("g1", 2, 3, 32, 32),
    ("g2", 1, 3, 48, 64),
    ("g3", 1, 3, 299, 299),
    ("g4", 1, 3, 341, 320),
]


def make_images(name, n, c, h, w):
    """Smooth colour patterns plus noise, quantised to uint8 as real samples are."""
    rng = np.random.default_rng(fnv1a64("images/" + name) & 0xffffffff)
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    out = np.empty((n, c, h, w), np.float64)
    for i in range(n):
        for ch in range(c):
            f = rng.uniform(1, 6, size=4)
            p = rng.uniform(0, 6.3, size=2)
            v = 0.5 + 0.25 * np.sin(f[0] * 6.28 * xx + p[0]) * np.cos(f[1] * 6.28 * yy + p[1])
            v += 0.2 * ((xx * f[2] + yy * f[3]) % 1.0) - 0.1
            v += rng.normal(0, 0.08, size=(h, w))
            out[i, ch] = v
    return np.clip(np.rint(out * 255), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# FID / IS references
# ---------------------------------------------------------------------------------------------
def fid_features(tag, n, d):
    """Correlated features f[n, j] = s_j u[n, j] + 0.5 u[n, (7j + 3) % d] + m_j (float32);
    tests/test_fid.c: make_features."""
    u = gen_uniform(tag + "/u", n * d, -1.0, 1.0).reshape(n, d)
    s = gen_uniform(tag + "/s", d, 0.2, 1.5)
    m = gen_uniform(tag + "/m", d, -0.5, 0.5)
    perm = (7 * np.arange(d) + 3) % d
    return (s * u + 0.5 * u[:, perm] + m).astype(np.float32)


def stats(f):
    f = f.astype(np.float64)
    return f.mean(axis=0), np.cov(f, rowvar=False)


def fid_sqrtm(mu1, sigma1, mu2, sigma2, eps=1e-6):
    """pytorch_fid.fid_score.calculate_frechet_distance."""
    diff = mu1 - mu2
    covmean, _ = scipy.linalg.sqrtm(sigma1.dot(sigma2), disp=False)
    if not np.isfinite(covmean).all():
        offset = np.eye(sigma1.shape[0]) * eps
        covmean = scipy.linalg.sqrtm((sigma1 + offset).dot(sigma2 + offset))
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            raise ValueError("imaginary component %g" % np.max(np.abs(covmean.imag)))
        covmean = covmean.real
    return float(diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(covmean))


def fid_eigh(mu1, sigma1, mu2, sigma2):
    """The symmetric-eigendecomposition route eval/fid.c takes (docs/design.md §4)."""
    w, v = np.linalg.eigh(sigma1)
    r = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    e = np.linalg.eigvalsh(r @ sigma2 @ r)
    diff = mu1 - mu2
    return float(diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * np.sqrt(np.clip(e, 0, None)).sum())


def is_logits(n, k):
    """tests/test_fid.c: make_logits."""
    x = gen_uniform("is/logits", n * k, -3.0, 3.0).reshape(n, k)
    x[np.arange(n), (np.arange(n) * 37) % k] += 5.0
    return x.astype(np.float32)


def inception_score(logits, splits=10):
    """torch-fidelity's isc in float64, without shuffling: split i is rows [i N/s, (i+1) N/s)."""
    x = logits.astype(np.float64)
    x = x - x.max(axis=1, keepdims=True)
    log_p = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    n = x.shape[0]
    scores = []
    for i in range(splits):
        a, b = i * n // splits, (i + 1) * n // splits
        q = p[a:b].mean(axis=0, keepdims=True)
        kl = (p[a:b] * (log_p[a:b] - np.log(q))).sum(axis=1).mean()
        scores.append(np.exp(kl))
    return float(np.mean(scores)), float(np.std(scores))


# ---------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-fid", action="store_true", help="only the Inception fixtures")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    model = fid_inception_v3()
    names = state_names(model)
    assert len(names) == 472, len(names)
    with open(os.path.join(args.out, "incep_names.txt"), "w") as f:
        for k, s in names:
            f.write(k + " " + " ".join(str(d) for d in s) + "\n")

    # Full-size random-weight file in the legacy format, loaded back as pytorch-fid does.
    sd = collections.OrderedDict((k, stored_like_real_file(k, gen_tensor(k, s))) for k, s in names)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pt_inception_random.pth")
        torch.save(sd, path, _use_new_zipfile_serialization=False)
        print("legacy file: %d tensors, %.1f MiB" % (len(sd), os.path.getsize(path) / 2**20))
        loaded = torch.load(path)
    assert list(loaded.keys()) == [k for k, _ in names]
    assert loaded["Conv2d_1a_3x3.conv.weight"].stride() == (1, 32, 288, 96)
    model.load_state_dict(loaded)  # strict, like pytorch-fid (num_batches_tracked is optional)

    ref = {}
    for g, n, c, h, w in GROUPS:
        img = make_images(g, n, c, h, w)
        x = torch.from_numpy(img.astype(np.float32) / 255.0)
        if c == 1:
            x = x.repeat(1, 3, 1, 1)
        pool3, logits = fid_forward(model, x)
        ref["images_" + g] = img
        ref["pool3_" + g] = pool3.numpy().astype(np.float32)
        ref["logits_" + g] = logits.numpy().astype(np.float32)
        p = pool3.numpy()
        print("%s %s: pool3 mean %.4f std %.4f max %.4f zeros %.3f; logits std %.4f" % (
            g, tuple(img.shape), p.mean(), p.std(), p.max(), (p == 0).mean(), logits.std().item()))
    np.savez_compressed(os.path.join(args.out, "incep_ref.npz"), **ref)

    # A few real-shaped tensors written by torch itself: the C writer must reproduce these bytes.
    small_names = ["Conv2d_1a_3x3.conv.weight", "Conv2d_1a_3x3.bn.weight", "Conv2d_1a_3x3.bn.bias",
                   "Conv2d_1a_3x3.bn.running_mean", "Conv2d_1a_3x3.bn.running_var",
                   "Conv2d_2a_3x3.conv.weight", "Mixed_6b.branch7x7_2.conv.weight", "fc.bias"]
    small = collections.OrderedDict((k, sd[k]) for k in small_names)
    torch.save(small, os.path.join(args.out, "incep_small.pth"), _use_new_zipfile_serialization=False)

    # A real module's state_dict: _metadata (BUILD), LongStorage, 0-d tensor, views, float64.
    m = torchvision.models.inception.BasicConv2d(3, 4, kernel_size=3)
    msd = m.state_dict()
    for k, v in msd.items():
        if v.dtype == torch.float32:
            v.copy_(torch.from_numpy(gen_uniform("meta/" + k, v.numel(), -1, 1).astype(np.float32)).view(v.shape))
    msd["bn.num_batches_tracked"].fill_(7)
    base = torch.from_numpy(gen_uniform("meta/base", 10, -1, 1).astype(np.float32))
    msd["extra.view"] = base[3:7]                        # storage offset 3, storage numel 10
    msd["extra.shared"] = base[0:2]                      # same storage again
    msd["extra.matrix_t"] = base.view(2, 5).t()          # [5, 2] with strides (1, 5)
    msd["extra.double"] = torch.from_numpy(gen_uniform("meta/double", 6, -1, 1)).view(2, 3)
    torch.save(msd, os.path.join(args.out, "incep_meta.pth"), _use_new_zipfile_serialization=False)

    if args.skip_fid:
        return
    lines = []
    cases = [("full", ("fidA", 4096), ("fidB", 3000)),     # full rank
             ("rankdef", ("fidC", 600), ("fidD", 700)),    # fewer samples than dimensions
             ("mixed", ("fidA", 4096), ("fidD", 700))]
    d = 2048
    for name, (ta, na), (tb, nb) in cases:
        mu1, s1 = stats(fid_features(ta, na, d))
        mu2, s2 = stats(fid_features(tb, nb, d))
        v_sqrtm = fid_sqrtm(mu1, s1, mu2, s2)
        v_eigh = fid_eigh(mu1, s1, mu2, s2)
        print("fid %s: sqrtm %.12g eigh %.12g rel %.2e" % (name, v_sqrtm, v_eigh, abs(v_sqrtm - v_eigh) / v_sqrtm))
        lines.append("fid_%s %s %d %s %d %.17g %.17g" % (name, ta, na, tb, nb, v_sqrtm, v_eigh))
        if name == "full":
            lines.append("trace_full_a %.17g" % np.trace(s1))
            lines.append("mu0_full_a %.17g" % mu1[0])
            lines.append("sigma01_full_a %.17g" % s1[0, 1])
    lg = is_logits(1003, 1008)
    mean, std = inception_score(lg, 10)
    lines.append("is_1003_10 %.17g %.17g" % (mean, std))
    mean1, std1 = inception_score(lg[:50], 1)
    lines.append("is_50_1 %.17g %.17g" % (mean1, std1))
    print("is: %.12g +- %.12g" % (mean, std))
    with open(os.path.join(args.out, "fid_ref.txt"), "w") as f:
        f.write("# written by tools/ref/make_inception_fixtures.py; see tests/test_fid.c\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
