#!/usr/bin/env python3
"""Writes the small regression inputs of tests/fuzz/regress/<harness>/ (plain Python 3, no numpy):
the reproducers of issue 18 and the findings of the fuzz campaign that are not byte-for-byte
copies of a libFuzzer crash file (those are committed as libFuzzer wrote them).

    python3 tests/fuzz/make_regress.py      # from the repository root

Each file is a few bytes edited from a fixture or built from a byte-exact recipe below; the
comment of each writer says which bug it triggered.
"""
import gzip
import os
import struct
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regress")


def put(harness, name, data):
    d = os.path.join(ROOT, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npz_zip64_extra_claims_16():
    """npy_zip64.npz with the first central-directory zip64 extra field claiming 16 bytes
    instead of 24: zip_open printed the entry name after zip_close had freed it (use after free,
    exit 139 in `mala eval fid --samples`)."""
    src = os.path.join(os.path.dirname(ROOT), "..", "fixtures", "npy_zip64.npz")
    d = bytearray(open(src, "rb").read())
    cd = d.find(b"PK\x01\x02")
    nl = struct.unpack_from("<H", d, cd + 28)[0]
    x = cd + 46 + nl                      # the extra field: id 0x0001, size 24
    assert struct.unpack_from("<HH", d, x) == (1, 24)
    struct.pack_into("<H", d, x + 2, 16)
    put("npz", "zip64_extra_claims_16.npz", bytes(d))


def idx_gz(items, ndims, cut):
    """A small gzip IDX file (magic 0x0800 | ndims, 28x28 images or labels) cut short by `cut`
    bytes: zlib's gzread reported a clean end when the 8-byte trailer was (partly) missing, so a
    truncated download was accepted."""
    if ndims == 3:
        head = struct.pack(">IIII", 0x803, items, 28, 28)
        body = bytes((i * 7 + i // 28) & 255 for i in range(items * 28 * 28))
    else:
        head = struct.pack(">II", 0x801, items)
        body = bytes(i % 10 for i in range(items))
    gz = gzip.compress(head + body, compresslevel=9, mtime=0)
    return gz[:len(gz) - cut] if cut else gz


def idx_files():
    for cut in (1, 4, 8, 9):
        put("idx", "images_cut%d.gz" % cut, idx_gz(3, 3, cut))
        put("idx", "labels_cut%d.gz" % cut, idx_gz(30, 1, cut))


def pnm16(kind, w, h):
    """A 16-bit binary PGM (P5) or PPM (P6), maxval 65535: stb_image's 16->8 conversion read past
    its buffer for these (heap over-read in stbi__convert_16_to_8)."""
    c = 1 if kind == "P5" else 3
    head = b"%s\n%d %d\n65535\n" % (kind.encode(), w, h)
    return head + b"".join(struct.pack(">H", (i * 997) & 0xFFFF) for i in range(w * h * c))


def image_files():
    put("image", "pgm16_40x30.pgm", pnm16("P5", 40, 30))
    put("image", "ppm16_20x10.ppm", pnm16("P6", 20, 10))
    # A 22-byte TGA header declaring 18176 x 6666 (uncompressed true colour, 24 bpp): stb_image
    # allocated 537 MB for it and spent 3 s.
    put("image", "tga_18176x6666.tga",
        struct.pack("<BBBHHBHHHHBB", 0, 0, 2, 0, 0, 0, 0, 0, 18176, 6666, 24, 0) + b"\x00" * 4)
    # A PNM header whose width overflows int (stb_image's parser: signed overflow, UB).
    put("image", "pnm_width_overflow.pgm", b"P5\n99999999999 1\n255\n\x00")
    # A PNG that declares 100000 x 100000 pixels in a valid IHDR (no image data).
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    put("image", "png_100000x100000.png", b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


def torch_files():
    # PROTO 2, then MARK as the first opcode: pop_mark computed NULL + 0 (UB) from an empty stack.
    put("torch_legacy", "mark_first.pth", bytes([0x80, 0x02, 0x28, 0x28, 0x28, 0x6C, 0x6C, 0xBE]))


if __name__ == "__main__":
    npz_zip64_extra_claims_16()
    idx_files()
    image_files()
    torch_files()
