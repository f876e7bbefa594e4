"""The sFID features of the FID Inception for the C test (tests/test_inception.c).

The ADM evaluator (openai/guided-diffusion evaluations/evaluator.py) takes its sFID features from
the TF graph's `mixed_6/conv:0`, keeps the first 7 channels (`spatial[..., :7]`) and flattens the
NHWC tensor. In the pytorch-fid port of that graph the tensor is Mixed_6d.branch1x1 after BN and
ReLU (TF's mixed, mixed_1, ..., mixed_10 are Mixed_5b .. Mixed_7c; a block's `conv` is its 1x1
branch). This script rebuilds pytorch-fid's network in plain torch (no torchvision), with the
random weights of tools/ref/make_inception_fixtures.py, checks its pool3 and logits against that
script's fixture (incep_ref.npz, made with torchvision), and writes incep_sfid.npz:
spatial_<group> float32 [N, 17*17*7] for the image groups of incep_ref.npz.

Run: /usr/bin/python3 tools/ref/make_sfid_fixture.py [--out tests/fixtures]   (torch, numpy)
"""
import argparse
import ast
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def load_generator():
    """fnv1a64, gen_uniform, weight_range and gen_tensor from make_inception_fixtures.py (that
    script needs torchvision and scipy at import; only these functions are taken from it)."""
    src = open(os.path.join(HERE, "make_inception_fixtures.py")).read()
    keep = {"fnv1a64", "gen_uniform", "weight_range", "gen_tensor"}
    tree = ast.parse(src)
    tree.body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in keep or
                 isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "M64" for t in n.targets)]
    ns = {"np": np}
    exec(compile(tree, "make_inception_fixtures.py", "exec"), ns)
    return ns["gen_tensor"]


class BasicConv2d(nn.Module):
    def __init__(self, cin, cout, k, s=1, p=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=s, padding=p, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def block(**convs):
    m = nn.Module()
    for name, args in convs.items():
        setattr(m, name, BasicConv2d(*args))
    return m


def block_a(cin, pf):
    return block(branch1x1=(cin, 64, 1), branch5x5_1=(cin, 48, 1), branch5x5_2=(48, 64, 5, 1, 2),
                 branch3x3dbl_1=(cin, 64, 1), branch3x3dbl_2=(64, 96, 3, 1, 1), branch3x3dbl_3=(96, 96, 3, 1, 1),
                 branch_pool=(cin, pf, 1))


def block_c(c7):
    return block(branch1x1=(768, 192, 1), branch7x7_1=(768, c7, 1), branch7x7_2=(c7, c7, (1, 7), 1, (0, 3)),
                 branch7x7_3=(c7, 192, (7, 1), 1, (3, 0)), branch7x7dbl_1=(768, c7, 1),
                 branch7x7dbl_2=(c7, c7, (7, 1), 1, (3, 0)), branch7x7dbl_3=(c7, c7, (1, 7), 1, (0, 3)),
                 branch7x7dbl_4=(c7, c7, (7, 1), 1, (3, 0)), branch7x7dbl_5=(c7, 192, (1, 7), 1, (0, 3)),
                 branch_pool=(768, 192, 1))


def block_e(cin):
    return block(branch1x1=(cin, 320, 1), branch3x3_1=(cin, 384, 1), branch3x3_2a=(384, 384, (1, 3), 1, (0, 1)),
                 branch3x3_2b=(384, 384, (3, 1), 1, (1, 0)), branch3x3dbl_1=(cin, 448, 1),
                 branch3x3dbl_2=(448, 384, 3, 1, 1), branch3x3dbl_3a=(384, 384, (1, 3), 1, (0, 1)),
                 branch3x3dbl_3b=(384, 384, (3, 1), 1, (1, 0)), branch_pool=(cin, 192, 1))


def fid_inception():
    m = nn.Module()
    m.Conv2d_1a_3x3 = BasicConv2d(3, 32, 3, 2)
    m.Conv2d_2a_3x3 = BasicConv2d(32, 32, 3)
    m.Conv2d_2b_3x3 = BasicConv2d(32, 64, 3, 1, 1)
    m.Conv2d_3b_1x1 = BasicConv2d(64, 80, 1)
    m.Conv2d_4a_3x3 = BasicConv2d(80, 192, 3)
    m.Mixed_5b, m.Mixed_5c, m.Mixed_5d = block_a(192, 32), block_a(256, 64), block_a(288, 64)
    m.Mixed_6a = block(branch3x3=(288, 384, 3, 2), branch3x3dbl_1=(288, 64, 1), branch3x3dbl_2=(64, 96, 3, 1, 1),
                       branch3x3dbl_3=(96, 96, 3, 2))
    m.Mixed_6b, m.Mixed_6c, m.Mixed_6d, m.Mixed_6e = block_c(128), block_c(160), block_c(160), block_c(192)
    m.Mixed_7a = block(branch3x3_1=(768, 192, 1), branch3x3_2=(192, 320, 3, 2), branch7x7x3_1=(768, 192, 1),
                       branch7x7x3_2=(192, 192, (1, 7), 1, (0, 3)), branch7x7x3_3=(192, 192, (7, 1), 1, (3, 0)),
                       branch7x7x3_4=(192, 192, 3, 2))
    m.Mixed_7b, m.Mixed_7c = block_e(1280), block_e(2048)
    m.fc = nn.Linear(2048, 1008)
    return m.eval()


def avg3(x):  # pytorch-fid's FID blocks: TF's average pool does not count the padding
    return F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)


def run_a(b, x):
    return torch.cat([b.branch1x1(x), b.branch5x5_2(b.branch5x5_1(x)),
                      b.branch3x3dbl_3(b.branch3x3dbl_2(b.branch3x3dbl_1(x))), b.branch_pool(avg3(x))], 1)


def run_c(b, x):
    d = b.branch7x7dbl_5(b.branch7x7dbl_4(b.branch7x7dbl_3(b.branch7x7dbl_2(b.branch7x7dbl_1(x)))))
    return torch.cat([b.branch1x1(x), b.branch7x7_3(b.branch7x7_2(b.branch7x7_1(x))), d, b.branch_pool(avg3(x))], 1)


def run_e(b, x, max_pool):
    t = b.branch3x3_1(x)
    d = b.branch3x3dbl_2(b.branch3x3dbl_1(x))
    p = F.max_pool2d(x, 3, 1, 1) if max_pool else avg3(x)
    return torch.cat([b.branch1x1(x), b.branch3x3_2a(t), b.branch3x3_2b(t), b.branch3x3dbl_3a(d),
                      b.branch3x3dbl_3b(d), b.branch_pool(p)], 1)


@torch.no_grad()
def forward(m, x):
    """pytorch-fid's InceptionV3 (resize, 2x - 1, blocks 0-3) on x [N, 3, H, W] in [0, 1]:
    pool3, the IS logits (no bias) and the sFID features."""
    x = 2 * F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False) - 1
    x = m.Conv2d_2b_3x3(m.Conv2d_2a_3x3(m.Conv2d_1a_3x3(x)))
    x = m.Conv2d_4a_3x3(m.Conv2d_3b_1x1(F.max_pool2d(x, 3, 2)))
    x = F.max_pool2d(x, 3, 2)
    x = run_a(m.Mixed_5c, run_a(m.Mixed_5b, x))
    x = run_a(m.Mixed_5d, x)
    b = m.Mixed_6a
    x = torch.cat([b.branch3x3(x), b.branch3x3dbl_3(b.branch3x3dbl_2(b.branch3x3dbl_1(x))), F.max_pool2d(x, 3, 2)], 1)
    x = run_c(m.Mixed_6c, run_c(m.Mixed_6b, x))
    spatial = m.Mixed_6d.branch1x1(x)[:, :7].permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # TF's NHWC order
    x = run_c(m.Mixed_6e, run_c(m.Mixed_6d, x))
    b = m.Mixed_7a
    x = torch.cat([b.branch3x3_2(b.branch3x3_1(x)),
                   b.branch7x7x3_4(b.branch7x7x3_3(b.branch7x7x3_2(b.branch7x7x3_1(x)))), F.max_pool2d(x, 3, 2)], 1)
    x = run_e(m.Mixed_7c, run_e(m.Mixed_7b, x, False), True)
    pool3 = F.adaptive_avg_pool2d(x, 1).flatten(1)
    return pool3, pool3 @ m.fc.weight.t(), spatial


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    gen_tensor = load_generator()
    m = fid_inception()
    sd = {k: torch.from_numpy(gen_tensor(k, tuple(v.shape))) for k, v in m.state_dict().items()
          if not k.endswith("num_batches_tracked")}
    m.load_state_dict(sd, strict=False)
    ref = np.load(os.path.join(args.out, "incep_ref.npz"))
    out = {}
    for key in sorted(k for k in ref.files if k.startswith("images_")):
        g = key[len("images_"):]
        img = ref[key]
        x = torch.from_numpy(img.astype(np.float32) / 255.0)
        if x.shape[1] == 1:
            x = x.repeat(1, 3, 1, 1)
        pool3, logits, spatial = forward(m, x)
        for name, got in (("pool3", pool3), ("logits", logits)):
            want = ref[name + "_" + g]
            err = np.abs(got.numpy() - want).max() / np.abs(want).max()
            assert err < 1e-5, (g, name, err)  # this network is torchvision's + pytorch-fid's blocks
        out["spatial_" + g] = spatial.numpy().astype(np.float32)
        s = out["spatial_" + g]
        print("%s %s: spatial %s mean %.4f std %.4f zeros %.3f" % (g, img.shape, s.shape, s.mean(), s.std(),
                                                                   (s == 0).mean()))
    np.savez_compressed(os.path.join(args.out, "incep_sfid.npz"), **out)


if __name__ == "__main__":
    main()
