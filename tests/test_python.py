# python/mala.py against `mala sample --class Sneaker --n 16 --sampler ddim --steps 8 --seed 5 --save-npy REF`
# (tests/test_library.sh makes REF): the same float32 images, bit for bit, and the uint8 ones
# converted from them as mala's PNGs are; an unknown class and a cancel raise mala.Error.
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import mala  # noqa: E402

ref = np.load(sys.argv[1])
ctx = mala.Context(device="cpu")
m = ctx.load("assets/mala-dit-fmnist.safetensors")
assert m.classes[7] == "Sneaker" and m.out_channels == 1 and m.out_size == 32, (m.classes, m.out_size)
steps = []
img = m.generate(cls="Sneaker", count=16, sampler="ddim", steps=8, seed=5,
                 on_step=lambda first, n, i, k, x0: steps.append((first, n, i, k, x0.shape)))
if img.shape != ref.shape or not np.array_equal(img.view(np.uint32), ref.view(np.uint32)):
    sys.exit("FAIL: mala.py's images differ from mala sample's (max |diff| %g)" % np.abs(img - ref).max())
assert steps[-1] == (0, 16, 7, 8, (16, 1, 32, 32)), steps[-1]
u8 = m.generate(cls=7, count=16, sampler="ddim", steps=8, seed=5, dtype="uint8")
want = np.clip(np.float32(127.5) * ref + np.float32(128), 0, 255).astype(np.uint8).transpose(0, 2, 3, 1)
assert u8.shape == (16, 32, 32, 1) and np.array_equal(u8, want), "uint8 images"  # (image_io.h's rounding)
for bad, word in ((lambda: m.generate(cls="Giraffe"), "unknown class"),
                  (lambda: m.generate(count=2, steps=3, on_step=lambda *a: True), "cancelled")):
    try:
        bad()
        sys.exit("FAIL: expected an error (%s)" % word)
    except mala.Error as e:
        assert word in str(e), str(e)
print("ok: python/mala.py (%s) makes mala sample's images bit for bit; uint8, step callback, cancel, errors"
      % sys.executable)

# The VAE against `mala vae encode` / `decode` on the same inputs (tests/fixtures/vae_tiny.safetensors),
# bit for bit; FID of a statistics file with itself is 0.
import subprocess  # noqa: E402
import tempfile  # noqa: E402

mala_bin = os.environ.get("MALA_BIN", "./mala")
VAE = "tests/fixtures/vae_tiny.safetensors"
v = ctx.vae(VAE, max_batch=2, max_size=16)
x = np.random.default_rng(0).uniform(-1, 1, (2, v.channels, 16, 16)).astype(np.float32)
with tempfile.TemporaryDirectory() as d:
    np.save(os.path.join(d, "x.npy"), x)
    subprocess.run([mala_bin, "vae", "encode", "--vae", VAE, "--in", os.path.join(d, "x.npy"), "--out",
                    os.path.join(d, "m.npz"), "--device", "cpu"], check=True, capture_output=True)
    mean = v.encode(x)
    want = np.load(os.path.join(d, "m.npz"))["mean"]
    assert mean.shape == want.shape and np.array_equal(mean, want), "VAE encode differs from mala vae encode"
    z = mean * np.float32(0.18215)
    np.save(os.path.join(d, "z.npy"), z)
    subprocess.run([mala_bin, "vae", "decode", "--vae", VAE, "--in", os.path.join(d, "z.npy"), "--out",
                    os.path.join(d, "y.npy"), "--device", "cpu"], check=True, capture_output=True)
    y = v.decode(z)
    assert y.shape == x.shape and np.array_equal(y, np.load(os.path.join(d, "y.npy"))), "VAE decode differs"
s = ctx.load_fid_stats("tests/fixtures/npy_stats.npz")
assert abs(ctx.fid(s, s)) < 1e-6, ctx.fid(s, s)
try:
    ctx.load_fid_stats("tests/fixtures/vae_tiny.safetensors")
    sys.exit("FAIL: expected an error loading a non-npz as statistics")
except mala.Error as e:
    assert "vae_tiny" in str(e), str(e)
print("ok: python/mala.py's VAE encode / decode = mala vae encode / decode, bit for bit; FID of stats with themselves 0")
