"""The calibration image sets of the Fashion-MNIST features (docs/eval.md), as ADM sample
batches (arr_0 uint8 [N, 32, 32, 1], arr_1 int64 labels [N]):

    class_means.npz   image i is the mean training image of class i % 10 (rounded to uint8)
    noise.npz         Gaussian noise N(0, 1) in the [-1, 1] pixel scale, clipped, quantised as
                      samples are (uint8 = clip(127.5 x + 128)); no labels

    /usr/bin/python3 tools/ref/make_calibration_sets.py OUTDIR [N]     (numpy only; N default 10000)
"""

import gzip
import os
import sys

import numpy as np

DATA_DIR = os.environ.get("MALA_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def load_train():
    with gzip.open(f"{DATA_DIR}/train-images-idx3-ubyte.gz") as f:
        img = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(f"{DATA_DIR}/train-labels-idx1-ubyte.gz") as f:
        lab = np.frombuffer(f.read(), np.uint8, offset=8)
    u8 = np.zeros((len(img), 32, 32), np.uint8)
    u8[:, 2:30, 2:30] = img
    return u8, lab


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    os.makedirs(out, exist_ok=True)
    u8, lab = load_train()
    means = np.stack([u8[lab == c].astype(np.float64).mean(0) for c in range(10)])
    labels = np.arange(n) % 10
    imgs = np.rint(means[labels]).astype(np.uint8)[..., None]
    np.savez(os.path.join(out, "class_means.npz"), imgs, labels.astype(np.int64))
    rng = np.random.RandomState(0)
    x = np.clip(rng.randn(n, 32, 32, 1), -1, 1)
    noise = np.clip(127.5 * x + 128, 0, 255).astype(np.uint8)
    np.savez(os.path.join(out, "noise.npz"), noise)
    print(f"{out}/class_means.npz, {out}/noise.npz: {n} images each")


if __name__ == "__main__":
    main()
