#!/usr/bin/python3
"""The table of tools/bench/sampler_steps_table.sh: for each run DIR/NAME.npy (float32 [N, 1, 32, 32]
samples in [-1, 1], all from the same initial noise) the mean absolute difference from the
reference run (the first NAME) and the Frechet distance in pixel space to the Fashion-MNIST test
set (10,000 images padded to 32x32 as mala trains on them; 1024-dimensional pixel vectors in
[0, 1]; with N samples the covariance is estimated from N images, so the figure is biased upwards
for small N and only comparable between runs of the same N).

    usage: sampler_table.py DIR REF NAME...
"""
import gzip
import os
import sys

import numpy as np

FMNIST = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"


def test_set():
    with gzip.open(FMNIST) as f:
        raw = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    return np.pad(raw, ((0, 0), (2, 2), (2, 2))).reshape(len(raw), -1) / 255.0


def quantised(x):  # as the sample files store them: uint8 of 127.5 x + 128, clamped
    return np.clip(127.5 * x.reshape(len(x), -1) + 128.0, 0, 255).astype(np.uint8) / 255.0


def sqrtm_psd(a):
    w, v = np.linalg.eigh((a + a.T) / 2)
    return (v * np.sqrt(np.clip(w, 0, None))) @ v.T


def frechet(x, mu2, s2, s2_half):
    mu1, s1 = x.mean(0), np.cov(x, rowvar=False)
    # tr sqrt(S1 S2) = tr sqrt(S2^1/2 S1 S2^1/2) (symmetric PSD, so eigh applies)
    covmean = np.sqrt(np.clip(np.linalg.eigvalsh(s2_half @ s1 @ s2_half), 0, None)).sum()
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * covmean)


def main():
    d, ref, names = sys.argv[1], sys.argv[2], sys.argv[2:]
    t = test_set()
    mu2, s2 = t.mean(0), np.cov(t, rowvar=False)
    s2_half = sqrtm_psd(s2)
    r = np.load(os.path.join(d, ref + ".npy"))
    print(f"| run | mean abs diff from {ref} | pixel FD to the test set (N = {len(r)}) |")
    print("|---|---|---|")
    for n in names:
        x = np.load(os.path.join(d, n + ".npy"))
        mad = float(np.abs(x - r).mean())
        print(f"| {n} | {mad:.4f} | {frechet(quantised(x), mu2, s2, s2_half):.2f} |")


if __name__ == "__main__":
    main()
