#!/usr/bin/env python3
"""Writes the fuzzing inputs of tests/fuzz/ (CI uses the committed files; nothing here runs there):

    /usr/bin/python3 tests/fuzz/make_inputs.py      # from the repository root

  regress/<harness>/  the reproducers of the first fuzzing campaign's findings: each a few bytes edited from a fixture or built
                      from a byte-exact recipe below, whose comment says which bug it triggered
                      (plain Python 3). Crash files found by the campaign are committed there as
                      libFuzzer wrote them.
  seeds/<harness>/    small valid (and a few nearly valid) inputs to start from: copies of small
                      test fixtures, and files made here (the images need PIL, the torch file torch;
                      without them those seeds are left as committed).
"""
import gzip
import io
import json
import os
import shutil
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "regress")
SEEDS = os.path.join(HERE, "seeds")
FIXTURES = os.path.join(HERE, "..", "fixtures")


def put(harness, name, data, root=ROOT):
    d = os.path.join(root, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npz_zip64_extra_claims_16():
    """npy_zip64.npz with the first central-directory zip64 extra field claiming 16 bytes
    instead of 24: zip_open printed the entry name after zip_close had freed it (use after free,
    exit 139 in `mala eval fid --samples`)."""
    src = os.path.join(FIXTURES, "npy_zip64.npz")
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


def jpeg_files():
    # A DHT segment whose 16 code counts add up to 16 * 255 codes (a table has room for 256):
    # Debian's stb_image (2022-09) has no check, so stbi__build_huffman and the value loop write
    # past the table (the campaign's first finding, in its first 50 runs). JPEG is now
    # libjpeg-turbo's, which refuses the table.
    counts = bytes([255] * 16)
    dht = b"\xff\xc4" + struct.pack(">H", 2 + 1 + 16 + 64) + b"\x00" + counts + bytes(64)
    put("image", "jpeg_dht_4080_codes.jpg", b"\xff\xd8" + dht + b"\xff\xd9")


def torch_files():
    # PROTO 2, then MARK as the first opcode: pop_mark computed NULL + 0 (UB) from an empty stack.
    put("torch_legacy", "mark_first.pth", bytes([0x80, 0x02, 0x28, 0x28, 0x28, 0x6C, 0x6C, 0xBE]))


# ---------------------------------------------------------------------------------------------
# seeds

def checkpoint_files():
    """A DiC model file whose stage width hidden x multiplier (1e6 x 1e5) overflowed an int in
    dic_plan (UBSan: signed integer overflow; `mala info` printed a negative channel count)."""
    meta = {"backbone": "dic", "image_size": "32", "in_channels": "1", "num_classes": "10", "learn_sigma": "true",
            "hidden": "1000000", "depths": "[1,1,1,1,1]", "multipliers": "[100000,100000,100000,100000,100000]",
            "skip_stride": "1"}
    put("checkpoint", "dic_width_overflow.safetensors", safetensors_bytes(meta, {}))
    # An unconditional model (num_classes 0) with an empty class_names list: the harness read the
    # last class name, names[-1] (ASan heap-buffer-overflow in fuzz_checkpoint.c; CI's short run).
    meta = {"backbone": "dit", "image_size": "32", "in_channels": "1", "num_classes": "0", "class_names": "[]",
            "depth": "1", "hidden": "8", "heads": "2", "patch": "8", "attn": "mala"}
    put("checkpoint", "unconditional_no_names.safetensors", safetensors_bytes(meta, {}))


def seed(harness, name, data):
    put(harness, name, data, SEEDS)


def copy_fixtures(harness, names):
    for n in names:
        with open(os.path.join(FIXTURES, n), "rb") as f:
            seed(harness, n, f.read())


def safetensors_bytes(meta, tensors):
    """A safetensors file laid out as the Python library does (tensors: name -> (dtype, shape, bytes))."""
    head, off, data = {}, 0, b""
    if meta:
        head["__metadata__"] = meta
    for name, (dt, shape, raw) in tensors.items():
        head[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    copy_fixtures("safetensors", ["st_unordered.safetensors", "st_layout.safetensors", "st_valid.safetensors"])
    seed("safetensors", "dtypes.safetensors", safetensors_bytes({"depth": "2", "class_names": "[\"a\",\"b\"]"}, {
        "f32": ("F32", [2, 2], struct.pack("<4f", 1, -2, 0.5, 3e38)),
        "f16": ("F16", [3], struct.pack("<3H", 0x3C00, 0x7C00, 0x0001)),
        "bf16": ("BF16", [2], struct.pack("<2H", 0x3F80, 0xFFC1)),
        "f64": ("F64", [1], struct.pack("<d", 1e-310)),
        "i32": ("I32", [2], struct.pack("<2i", -7, 2**31 - 1)),
        "i64": ("I64", [], struct.pack("<q", -2**63)),
        "u8": ("U8", [4], bytes([0, 1, 254, 255])),
        "empty": ("F32", [0, 5], b""),
    }))
    seed("safetensors", "empty.safetensors", safetensors_bytes({}, {}))


def checkpoint_seeds():
    """Model files and training checkpoints of each backbone as the trainer and `mala export` write
    their metadata (tiny configurations, so fuzz_checkpoint builds them), each with one tensor of
    the table: the configuration, the trainer's settings and the strict load all run."""
    common = {"image_size": "32", "in_channels": "1", "num_classes": "3", "learn_sigma": "true",
              "class_names": json.dumps(["T-shirt/top", "Trouser", "Pullover"])}
    train = {"step": "4", "batches": "4", "skipped": "0", "seed": "0", "batch": "8", "lr": "0.000500000024",
             "warmup": "2", "decay_start": "2", "decay_end": "4", "lr_end": "2.49999994e-05", "weight_decay": "0",
             "grad_clip": "0", "ema_decay": "0.999000013", "label_drop": "0.100000001",
             "run.data": "fashion-mnist", "run.log_every": "2"}
    backbones = {
        "dit_mala": {"backbone": "dit", "depth": "1", "hidden": "8", "heads": "2", "patch": "8", "lepe": "3",
                     "rope": "true", "gate": "false", "attn": "mala"},
        "dit_softmax": {"backbone": "dit", "depth": "2", "hidden": "8", "heads": "1", "patch": "4", "lepe": "0",
                        "rope": "false", "gate": "false", "attn": "softmax"},
        "dig": {"backbone": "dig", "depth": "2", "hidden": "8", "heads": "2", "patch": "8"},
        "dic": {"backbone": "dic", "hidden": "4", "depths": "[1,1,1,1,1]", "multipliers": "[1,2,2,2,1]",
                "skip_stride": "1"},
    }
    for name, meta in backbones.items():
        h = int(meta["hidden"])
        t = {"y_embedder.embedding_table.weight": ("F16", [4, h], struct.pack(f"<{4 * h}H", *([0x3C00] * 4 * h)))}
        seed("checkpoint", f"{name}.safetensors", safetensors_bytes(dict(common, **meta), t))
        t["ema.y_embedder.embedding_table.weight"] = t["y_embedder.embedding_table.weight"]
        seed("checkpoint", f"{name}_ckpt.safetensors", safetensors_bytes(dict(common, **meta, **train), t))
    seed("checkpoint", "latent.safetensors", safetensors_bytes(dict(common, **backbones["dit_mala"], latent="true",
                                                                    latent_scale="0.18215", in_channels="4"), {}))


def fmnist_seeds():
    """The Fashion-MNIST classifier's tensor names: block 0 at its real shapes (the whole file,
    ~740 KB, is beyond -max_len), the rest at shape [1], so the shape checks run."""
    widths = [32, 64, 96, 128]
    t, cin = {}, 1
    for b, c in enumerate(widths):
        real = b == 0
        t[f"blocks.{b}.conv.weight"] = ("F32", [c, cin, 3, 3] if real else [1], struct.pack(f"<{c * cin * 9 if real else 1}f", *([0.1] * (c * cin * 9 if real else 1))))
        for part in ("conv.bias", "norm.weight", "norm.bias"):
            t[f"blocks.{b}.{part}"] = ("F32", [c if real else 1], struct.pack(f"<{c if real else 1}f", *([1.0] * (c if real else 1))))
        cin = c
    t["fc.weight"] = ("F32", [10, 128], struct.pack("<1280f", *([0.01] * 1280)))
    t["fc.bias"] = ("F32", [10], struct.pack("<10f", *range(10)))
    seed("fmnist", "names.safetensors", safetensors_bytes({"format": "mala-fmnist-classifier"}, t))


def torch_seeds():
    copy_fixtures("torch_legacy", ["incep_meta.pth"])
    try:
        import torch
    except ImportError:
        return
    from collections import OrderedDict
    sd = OrderedDict()
    sd["conv.weight"] = torch.arange(24, dtype=torch.float32).reshape(2, 3, 2, 2).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    sd["fc.weight"] = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()
    sd["half"] = torch.tensor([1.0, -2.0, 65504.0], dtype=torch.float16)
    sd["bf16"] = torch.tensor([1.5, -0.25], dtype=torch.bfloat16)
    sd["f64"] = torch.tensor([[1e-300]], dtype=torch.float64)
    sd["count"] = torch.tensor(7)
    base = torch.arange(10, dtype=torch.float32)
    sd["view"] = base[3:7]
    sd["scalar"] = torch.tensor(2.5)
    b = io.BytesIO()
    torch.save(sd, b, _use_new_zipfile_serialization=False)
    seed("torch_legacy", "small_state_dict.pth", b.getvalue())


def npy_seeds():
    names = sorted(n for n in os.listdir(FIXTURES) if n.startswith("npy_") and n.endswith(".npy"))
    copy_fixtures("npy", names)


def npz_seeds():
    # small archives only: the npz harness slows down with the data size (138 exec/s on 644 KB)
    copy_fixtures("npz", ["npy_zip64.npz", "npy_compressed.npz", "npy_samples.npz", "npy_grid.npz", "npy_stats.npz"])


def json_seeds():
    texts = {
        "header.json": '{"__metadata__":{"depth":"4","class_names":"[\\"T-shirt/top\\"]"},'
                       '"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}',
        "numbers.json": '[0,-0,1e308,-1.5e-324,123456789012345678901234567890,18446744073709551615,'
                        '9223372036854775807,-9223372036854775808,0.1e+2,1E-2]',
        "strings.json": '["\\u00e9\\ud83d\\ude00\\u0000\\n\\t\\"\\\\/","caf\u00e9 \u6f22"]',
        "nested.json": "[" * 30 + "{}" + "]" * 30,
        "literals.json": ' {"a":true,"b":false,"c":null,"d":[],"e":{}} ',
        "result_line.json": '{"cmd":"eval is","is_mean":1.000000,"is_std":0.000000,"splits":10}',
    }
    for n, t in texts.items():
        seed("json", n, t.encode())


def idx_seeds():
    seed("idx", "images.gz", idx_gz(2, 3, 0))
    seed("idx", "labels.gz", idx_gz(5, 1, 0))
    seed("idx", "labels.idx1", gzip.decompress(idx_gz(5, 1, 0)))
    seed("idx", "images.idx3", gzip.decompress(idx_gz(1, 3, 0)))


def image_seeds():
    for n in ("pgm16_40x30.pgm", "ppm16_20x10.ppm"):
        with open(os.path.join(ROOT, "image", n), "rb") as f:
            seed("image", n, f.read())
    seed("image", "p5_maxval1000.pgm", b"P5 # comment\n3 2\n1000\n" + struct.pack(">6H", 0, 1, 500, 999, 1000, 7))
    seed("image", "p6_8bit.ppm", b"P6\n2 2\n255\n" + bytes(range(12)))
    try:
        from PIL import Image
    except ImportError:
        return
    w, h = 9, 7
    rgb = Image.new("RGB", (w, h))
    rgb.putdata([((x * 29) % 256, (y * 37) % 256, (x * y * 11) % 256) for y in range(h) for x in range(w)])
    def save(name, im, fmt, **kw):
        b = io.BytesIO()
        im.save(b, fmt, **kw)
        seed("image", name, b.getvalue())
    save("rgb.png", rgb, "PNG")
    save("gray.png", rgb.convert("L"), "PNG")
    save("gray_alpha.png", rgb.convert("LA"), "PNG")
    save("rgba.png", rgb.convert("RGBA"), "PNG")
    save("palette.png", rgb.convert("P"), "PNG")
    save("bits1.png", rgb.convert("1"), "PNG")
    save("gray16.png", rgb.convert("I").point(lambda v: v * 257).convert("I;16"), "PNG")
    save("trns.png", rgb.convert("L"), "PNG", transparency=0)
    save("baseline.jpg", rgb, "JPEG", quality=80)
    save("gray.jpg", rgb.convert("L"), "JPEG", quality=80)
    save("progressive.jpg", rgb, "JPEG", quality=70, progressive=True)
    save("subsampled.jpg", rgb.resize((17, 13)), "JPEG", quality=60, subsampling=2)
    save("rgb24.bmp", rgb, "BMP")
    save("palette8.bmp", rgb.convert("P"), "BMP")
    save("bits1.bmp", rgb.convert("1"), "BMP")
    save("rgba32.bmp", rgb.convert("RGBA"), "BMP")


def npy_bytes(descr, shape, raw):
    """A .npy file (format 1.0) as numpy.save writes it."""
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else ""))
    d += " " * (-(10 + len(d) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + raw


def latents_seeds():
    """A latent set of mala encode (data/latents.h) as fuzz_latents takes it: its five files
    joined by the separator. 3 images, 2 views, [2, 2, 2] latents, float16 and float32."""
    sep = b"\n@@latents@@\n"
    for dtype, descr, size in (("float16", "<f2", 2), ("float32", "<f4", 4)):
        manifest = {"format": "mala-latents", "version": 1, "count": 3, "views": 2, "dtype": dtype,
                    "latent_shape": [2, 2, 2], "image_size": 16, "scale": 0.18215, "crop": "adm_center_crop_arr",
                    "num_classes": 2, "shard_images": 2, "shards_done": 1, "complete": False,
                    "vae": {"file": "v.safetensors", "bytes": 10, "hash64": "0123456789abcdef"},
                    "source": {"dir": "imgs", "images": 3, "list_hash64": "fedcba9876543210"}}
        n = 3 * 2 * 8
        if size == 2:
            mean = b"".join(struct.pack("<e", (i % 7) / 4 - 0.5) for i in range(n))
            logvar = b"".join(struct.pack("<e", -(i % 5)) for i in range(n))
        else:
            mean = b"".join(struct.pack("<f", (i % 7) / 4 - 0.5) for i in range(n))
            logvar = b"".join(struct.pack("<f", -(i % 5)) for i in range(n))
        parts = [json.dumps(manifest).encode(), npy_bytes(descr, (3, 2, 2, 2, 2), mean),
                 npy_bytes(descr, (3, 2, 2, 2, 2), logvar), npy_bytes("<i4", (3,), struct.pack("<3i", 0, 1, 1)),
                 b'["cat", "dog"]']
        seed("latents", "set_%s.bin" % dtype, sep.join(parts))


if __name__ == "__main__":
    latents_seeds()
    npz_zip64_extra_claims_16()
    idx_files()
    image_files()
    jpeg_files()
    torch_files()
    checkpoint_files()
    safetensors_seeds()
    checkpoint_seeds()
    torch_seeds()
    fmnist_seeds()
    npy_seeds()
    npz_seeds()
    json_seeds()
    idx_seeds()
    image_seeds()
