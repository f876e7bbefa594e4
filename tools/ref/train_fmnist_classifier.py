"""Trains the Fashion-MNIST feature classifier behind `mala eval --features fmnist`.

The images are what our diffusion models produce: 1 x 32 x 32 (the 28 x 28 digits padded by 2
with black), values in [-1, 1] (u8 / 127.5 - 1). The network uses only ops the C backends have
(eval/fmnist_features.c runs it on the op table):

    4 x [conv 3x3 (pad 1, stride 1, 2, 2, 2) -> GroupNorm(8) -> exact GELU]   32 -> 64 -> 96 -> 128 ch
    global mean over the 4 x 4 map  -> the 128-d features (FD, precision/recall, KID)
    Linear(128, 10)                 -> the logits (class accuracy)

Deterministic: fixed seeds, one thread count, no data-loader workers. Writes
assets/fmnist_classifier.safetensors (F32, the state_dict names of FmnistClassifier) with its
test accuracy in the metadata.

    /usr/bin/python3 tools/ref/train_fmnist_classifier.py [--epochs 5] [--out assets/fmnist_classifier.safetensors]
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

DATA_DIR = "/usr/share/datasets/fashion-mnist"
WIDTHS = (32, 64, 96, 128)
STRIDES = (1, 2, 2, 2)
GROUPS = 8
EPS = 1e-5


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.norm = nn.GroupNorm(GROUPS, cout, eps=EPS)

    def forward(self, x):
        return F.gelu(self.norm(self.conv(x)))


class FmnistClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        cins = (1,) + WIDTHS[:-1]
        self.blocks = nn.ModuleList([Block(ci, co, s) for ci, co, s in zip(cins, WIDTHS, STRIDES)])
        self.fc = nn.Linear(WIDTHS[-1], 10)

    def features(self, x):
        for b in self.blocks:
            x = b(x)
        return x.mean(dim=(2, 3))

    def forward(self, x):
        f = self.features(x)
        return f, self.fc(f)


def load_split(test):
    pre = "t10k" if test else "train"
    with gzip.open(f"{DATA_DIR}/{pre}-images-idx3-ubyte.gz") as f:
        img = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(f"{DATA_DIR}/{pre}-labels-idx1-ubyte.gz") as f:
        lab = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    u8 = np.zeros((len(img), 32, 32), np.uint8)
    u8[:, 2:30, 2:30] = img
    return u8, lab


def to_input(u8):
    """uint8 [N, 32, 32] -> float [N, 1, 32, 32] in [-1, 1], as data/dataset.c maps pixels."""
    return torch.from_numpy(u8.astype(np.float32) / np.float32(127.5) - np.float32(1.0)).unsqueeze(1)


def augment(x, rng):
    """Random horizontal flip and a shift of up to 2 pixels (within the black border)."""
    n = x.shape[0]
    flip = torch.from_numpy(rng.random_sample(n) < 0.5)
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    dy, dx = rng.randint(-2, 3, size=2)
    return torch.roll(x, shifts=(int(dy), int(dx)), dims=(2, 3))


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            _, lg = model(x[i:i + batch])
            correct += int((lg.argmax(1) == y[i:i + batch]).sum())
    return correct / len(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="assets/fmnist_classifier.safetensors")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = np.random.RandomState(args.seed)

    xtr_u8, ytr = load_split(False)
    xte_u8, yte = load_split(True)
    xtr, xte = to_input(xtr_u8), to_input(xte_u8)
    ytr, yte = torch.from_numpy(ytr), torch.from_numpy(yte)

    model = FmnistClassifier()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps_per_epoch = len(xtr) // args.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch)
    t0 = time.time()
    for ep in range(args.epochs):
        model.train()
        perm = torch.from_numpy(rng.permutation(len(xtr)))
        total = 0.0
        for s in range(steps_per_epoch):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            xb = augment(xtr[idx], rng)
            _, lg = model(xb)
            loss = F.cross_entropy(lg, ytr[idx], label_smoothing=0.05)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss)
        acc = evaluate(model, xte, yte)
        print(f"epoch {ep + 1}/{args.epochs}: loss {total / steps_per_epoch:.4f}, test accuracy {acc:.4f}, "
              f"{time.time() - t0:.0f} s", flush=True)
    acc = evaluate(model, xte, yte)
    meta = {
        "format": "mala-fmnist-classifier",
        "script": "tools/ref/train_fmnist_classifier.py",
        "test_accuracy": f"{acc:.4f}",
        "widths": ",".join(map(str, WIDTHS)),
        "strides": ",".join(map(str, STRIDES)),
        "groups": str(GROUPS),
        "eps": str(EPS),
        "input": "1x32x32 in [-1, 1] (28x28 padded by 2 with -1)",
        "epochs": str(args.epochs),
        "seed": str(args.seed),
    }
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    st_io.save(args.out, sd, meta)
    print(f"test accuracy {acc:.4f}; {sum(v.numel() for v in sd.values())} parameters -> {args.out}")


if __name__ == "__main__":
    main()
