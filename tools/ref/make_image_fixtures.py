#!/usr/bin/env python3
"""Writes tests/fixtures/img_*: small image files of every decoder path that formats/image_io.c has
(PNG through stb_image, JPEG through libjpeg-turbo, BMP through stb_image), and img_pil.npz with
what Pillow reads from each: rgb_<name> = np.asarray(Image.open(f).convert("RGB")) and l_<name>
= ... convert("L"). tests/test_data.c decodes the files and compares pixel for pixel.

    /usr/bin/python3 tools/ref/make_image_fixtures.py      # Debian's python: numpy, Pillow

(16-bit files are not here: Pillow clips 16-bit samples to 255 where this program rescales them;
tests/test_data.c checks those against the closed form.)
"""
import io
import os

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")


def pattern(w, h):
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([(x * 23 + y * 3) % 256, (y * 29 + 40) % 256, (x * y * 7 + 11) % 256], -1)
    return Image.fromarray(rgb.astype(np.uint8), "RGB")


def main():
    base = pattern(23, 17)
    files = {
        "img_baseline.jpg": (base, "JPEG", dict(quality=85)),                       # 4:2:0
        "img_444.jpg": (base, "JPEG", dict(quality=90, subsampling=0)),
        "img_progressive.jpg": (base, "JPEG", dict(quality=75, progressive=True)),
        "img_gray.jpg": (base.convert("L"), "JPEG", dict(quality=80)),
        "img_cmyk.jpg": (base.convert("CMYK"), "JPEG", dict(quality=90)),          # Adobe, inverted
        "img_rgba.png": (base.convert("RGBA"), "PNG", {}),
        "img_palette.png": (base.convert("P"), "PNG", {}),
        "img_gray_alpha.png": (base.convert("LA"), "PNG", {}),
        "img_rgb.bmp": (base, "BMP", {}),
    }
    arrays = {}
    for name, (im, fmt, kw) in files.items():
        b = io.BytesIO()
        im.save(b, fmt, **kw)
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(b.getvalue())
        back = Image.open(os.path.join(OUT, name))
        key = name[4:].replace(".", "_")
        arrays["rgb_" + key] = np.asarray(back.convert("RGB"))
        arrays["l_" + key] = np.asarray(back.convert("L"))
    np.savez(os.path.join(OUT, "img_pil.npz"), **arrays)


if __name__ == "__main__":
    main()
