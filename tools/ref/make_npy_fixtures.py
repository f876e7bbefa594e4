#!/usr/bin/env python3
"""Writes the small reference files that tests/test_npy.c and tests/test_data.c read.

Run from the repository root with Debian's python (numpy, Pillow, torch, torchvision):

    /usr/bin/python3 tools/ref/make_npy_fixtures.py

Every value is a closed-form function that the C tests recompute, so the files only have to be
produced by the real libraries (numpy's writers, Pillow's resize, torchvision's save_image).
"""
import io
import os
import struct
import tempfile
import zipfile
import zlib

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")


def path(name):
    return os.path.join(OUT, name)


# ---------------------------------------------------------------------------------------------
# .npy / .npz written by numpy

def samples_u8(n, h, w, c):
    i = np.arange(n).reshape(n, 1, 1, 1)
    y = np.arange(h).reshape(1, h, 1, 1)
    x = np.arange(w).reshape(1, 1, w, 1)
    ch = np.arange(c).reshape(1, 1, 1, c)
    return ((i * 7 + y * 5 + x * 3 + ch) % 256).astype(np.uint8)


def write_npy():
    np.save(path("npy_f32.npy"), np.arange(12, dtype=np.float32).reshape(3, 4) * np.float32(0.25) - np.float32(1))
    np.save(path("npy_f64.npy"), np.arange(12).reshape(2, 3, 2) / 3.0)
    np.save(path("npy_i4.npy"), np.array([-5, 0, 7, 2**31 - 1], dtype="<i4"))
    np.save(path("npy_i8.npy"), np.array([-(2**40), 3, 2**62], dtype="<i8"))
    np.save(path("npy_u8.npy"), samples_u8(2, 3, 4, 3))
    np.save(path("npy_bool.npy"), np.array([True, False, True]))
    np.save(path("npy_scalar.npy"), np.array(3.5))
    np.save(path("npy_empty.npy"), np.zeros((0, 3), dtype=np.float32))
    np.save(path("npy_fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.save(path("npy_bigendian.npy"), np.arange(4, dtype=">f4"))
    with open(path("npy_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, np.arange(5, dtype=np.float32), version=(2, 0))

    np.savez(path("npy_samples.npz"), samples_u8(4, 8, 8, 3), np.array([0, 5, 9, 2], dtype=np.int64))
    idx = np.arange(16)
    sigma = 1.0 / (1.0 + np.abs(idx[:, None] - idx[None, :]))
    np.savez(path("npy_stats.npz"), mu=np.linspace(-1.0, 1.0, 16), sigma=sigma)
    np.savez_compressed(path("npy_compressed.npz"),
                        x=np.sin(np.arange(100)).astype(np.float32).reshape(10, 10),
                        y=np.arange(10, dtype=np.int32))


def npy_bytes(arr):
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()


def write_zip64():
    """A stored archive in which every size and offset goes through zip64 records (what numpy
    produces for arrays over 4 GiB), small enough to commit."""
    entries = [("a.npy", npy_bytes(np.arange(6, dtype=np.float32))),
               ("b.npy", npy_bytes(np.array([1, 2, 3], dtype=np.int64)))]
    out = bytearray()
    cd = bytearray()
    for name, data in entries:
        off = len(out)
        crc = zlib.crc32(data)
        nb = name.encode()
        extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                           len(nb), len(extra)) + nb + extra + data
        cextra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), off)
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                          0xFFFFFFFF, len(nb), len(cextra), 0, 0, 0, 0, 0xFFFFFFFF) + nb + cextra
    cd_off = len(out)
    out += cd
    z64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(entries), len(entries), len(cd), cd_off)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path("npy_zip64.npz"), "wb") as f:
        f.write(out)
    with np.load(path("npy_zip64.npz")) as z:   # numpy must agree that this is a valid archive
        assert np.array_equal(z["a"], np.arange(6, dtype=np.float32))
        assert np.array_equal(z["b"], [1, 2, 3])


# ---------------------------------------------------------------------------------------------
# Pillow: ADM's center_crop_arr on procedurally generated images

def pattern(w, h):
    """uint8 RGB H x W x 3; tests/test_data.c has the same formula (crop_pattern)."""
    y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    v = (x * 37 + y * 91 + c * 53 + ((x * y) % 17) * 11 + ((x ^ y) & 7) * 9) % 256
    return v.astype(np.uint8)


def center_crop_arr(pil_image, image_size):
    from PIL import Image
    while min(*pil_image.size) >= 2 * image_size:
        pil_image = pil_image.resize(tuple(x // 2 for x in pil_image.size), resample=Image.BOX)
    scale = image_size / min(*pil_image.size)
    pil_image = pil_image.resize(tuple(round(x * scale) for x in pil_image.size), resample=Image.BICUBIC)
    arr = np.array(pil_image)
    crop_y = (arr.shape[0] - image_size) // 2
    crop_x = (arr.shape[1] - image_size) // 2
    return arr[crop_y: crop_y + image_size, crop_x: crop_x + image_size]


CROP_CASES = [  # (key, w, h, size, mode)
    ("c64x48", 64, 48, 32, "RGB"),
    ("c131x97", 131, 97, 32, "RGB"),
    ("c20x30", 20, 30, 32, "RGB"),
    ("c64x48_l", 64, 48, 32, "L"),
    ("c300x260", 300, 260, 40, "RGB"),
    ("c32x32", 32, 32, 32, "RGB"),
]


def write_crops():
    from PIL import Image
    out = {}
    for key, w, h, size, mode in CROP_CASES:
        img = Image.fromarray(pattern(w, h), "RGB")
        if mode == "L":
            img = img.convert("L")
        out[key] = center_crop_arr(img, size)
    # PIL resize alone (each filter), for the resampler itself
    img = Image.fromarray(pattern(23, 17), "RGB")
    out["r_box"] = np.array(img.resize((10, 7), resample=Image.BOX))
    out["r_bilinear"] = np.array(img.resize((31, 9), resample=Image.BILINEAR))
    out["r_bicubic"] = np.array(img.resize((11, 29), resample=Image.BICUBIC))
    np.savez_compressed(path("npy_pil_crop.npz"), **out)


# ---------------------------------------------------------------------------------------------
# torchvision.utils.save_image(normalize=True, value_range=(-1, 1))

GRID_CASES = [  # (key, n, c, h, w, nrow, padding)
    ("g5x3", 5, 3, 6, 5, 2, 2),
    ("g3x1", 3, 1, 4, 4, 8, 1),
    ("g1x3", 1, 3, 5, 7, 8, 2),
]


def grid_input(n, c, h, w):
    """float32 NCHW; tests/test_npy.c recomputes it as (float)(1.3 * sin(0.37 * i))."""
    i = np.arange(n * c * h * w, dtype=np.float64)
    return (1.3 * np.sin(0.37 * i)).astype(np.float32).reshape(n, c, h, w)


def write_grids():
    import torch
    from PIL import Image
    from torchvision.utils import save_image
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, n, c, h, w, nrow, pad in GRID_CASES:
            p = os.path.join(tmp, key + ".png")
            save_image(torch.from_numpy(grid_input(n, c, h, w)), p, nrow=nrow, padding=pad,
                       normalize=True, value_range=(-1, 1))
            out[key] = np.array(Image.open(p).convert("RGB"))
    np.savez(path("npy_grid.npz"), **out)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write_npy()
    write_zip64()
    write_crops()
    write_grids()
    total = 0
    for f in sorted(os.listdir(OUT)):
        if f.startswith("npy_"):
            total += os.path.getsize(path(f))
            print(f"{f:24s} {os.path.getsize(path(f)):7d} bytes")
    print(f"total {total} bytes")
