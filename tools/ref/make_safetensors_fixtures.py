#!/usr/bin/python3
"""Writes the safetensors fixtures that tests/test_safetensors.c reads (tests/fixtures/st_*).

The `safetensors` package is not installed here, so save_file() below lays files out exactly as
the library (safetensors/src/tensor.rs: prepare + serialize) does:
  * tensors sorted by descending dtype (the order of its Dtype enum: ... U8 < F16 < BF16 < I32 <
    F32 < F64 < I64 ...), then by name; data packed back to back in that order;
  * header = serde_json compact JSON: "__metadata__" first (when given), then each tensor as
    {"dtype":..,"shape":[..],"data_offsets":[begin,end]} in the same order; non-ASCII text kept
    as UTF-8; padded with spaces to a multiple of 8 bytes;
  * 8-byte little-endian header length, header, data.
The one difference: the library keeps __metadata__ in a hash map (arbitrary order); here it is
written in the order given.

Usage: /usr/bin/python3 tools/ref/make_safetensors_fixtures.py   (from the repository root)
"""
import json
import os
import struct

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")

DTYPE_NAME = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
              torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8"}
# Position in the library's Dtype enum; files store higher ranks first.
DTYPE_RANK = {"U8": 1, "F16": 7, "BF16": 8, "I32": 9, "F32": 11, "F64": 12, "I64": 13}

FASHION_MNIST = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                 "Bag", "Ankle boot"]


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: take the bits
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def header_json(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def pad8(header):
    return header + b" " * ((8 - len(header) % 8) % 8)


def save_file(tensors, path, metadata=None):
    items = sorted(tensors.items(), key=lambda kv: (-DTYPE_RANK[DTYPE_NAME[kv[1].dtype]], kv[0]))
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in items:
        blob = tensor_bytes(t)
        header[name] = {"dtype": DTYPE_NAME[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    write_raw(path, pad8(header_json(header)), b"".join(blobs))


def write_raw(path, header, data):
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)
    print(f"wrote {path} ({8 + len(header) + len(data)} bytes)")


def conversion_sources():
    """float32 values whose F16/BF16 rounding is delicate: ties, subnormals, overflow, inf, nan."""
    special = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, -65520.0, 1e5, float("inf"),
               float("-inf"), float("nan"), 2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 3 * 2.0 ** -25,
               2.0 ** -26, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11,
               1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 3.4e38, -3.4e38, 3.3895e38, 1e-40, -1e-45, 0.1, -2.5]
    g = torch.Generator().manual_seed(7)
    scaled = torch.randn(96, generator=g) * torch.logspace(-9, 6, 96)
    bits = torch.randint(-2 ** 31, 2 ** 31 - 1, (128,), generator=g, dtype=torch.int64).to(torch.int32)
    return torch.cat([torch.tensor(special, dtype=torch.float32), scaled, bits.view(torch.float32)])


def model_metadata():
    return {"depth": "2", "hidden": "64", "heads": "2", "patch": "2", "image_size": "32",
            "in_channels": "1", "num_classes": "10", "learn_sigma": "true", "rope": "true",
            "gate": "false", "lepe": "5", "attn": "mala", "class_names": json.dumps(FASHION_MNIST),
            "step": "1234", "note": "quote \" backslash \\ newline \n tab \t e-acute \u00e9 han \u6f22 emoji \U0001F600"}


def write_valid():
    f16 = (torch.arange(12, dtype=torch.float32) * 0.1 - 0.55).reshape(3, 4).half()
    bf16 = (torch.arange(8, dtype=torch.float32) * 0.3 - 1.1).reshape(2, 2, 2).bfloat16()
    f64 = torch.arange(5, dtype=torch.float64) / 3
    src = conversion_sources()
    tensors = {
        "x_embedder.proj.weight": (torch.arange(16, dtype=torch.float32) * 0.25 - 2).reshape(4, 1, 2, 2),
        "x_embedder.proj.bias": torch.tensor([0.5, -0.5, 1.5, -1.5]),
        "w.f16": f16, "w.f16.ref": f16.float(),
        "w.bf16": bf16, "w.bf16.ref": bf16.float(),
        "w.f64": f64, "w.f64.ref": f64.float(),
        "labels": torch.tensor([3, -1, 9], dtype=torch.int64),
        "idx": torch.tensor([7, -8], dtype=torch.int32),
        "mask": torch.tensor([0, 1, 255, 128], dtype=torch.uint8),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 3),
        "conv.src": src, "conv.f16": src.half(), "conv.bf16": src.bfloat16(),
    }
    save_file(tensors, os.path.join(OUT, "st_valid.safetensors"), model_metadata())


def write_layout():
    """One tensor of each dtype, values the C test recomputes: its writer must match byte for byte."""
    ar = lambda n: torch.arange(n, dtype=torch.float32) * 0.5 - 1.25
    tensors = {"a": ar(6).reshape(2, 3).half(), "b": ar(3), "c": ar(4).reshape(2, 2).bfloat16(),
               "d": ar(2).double(), "e": torch.tensor([-3, 4], dtype=torch.int64),
               "f": torch.tensor([0, 7, 255], dtype=torch.uint8), "g": torch.tensor([-9], dtype=torch.int32),
               "s": torch.tensor(2.25), "z": torch.zeros(2, 0)}
    save_file(tensors, os.path.join(OUT, "st_layout.safetensors"), {"format": "pt", "note": "caf\u00e9 \"x\"\n"})


def write_unordered():
    """Valid, but not in the library's order: data in reverse name order, header entries shuffled,
    __metadata__ last, whitespace inside the JSON, header padded to a length that is not a multiple of 8."""
    tensors = {"alpha": torch.tensor([1.0, 2.0]), "beta": torch.tensor([[3.0], [4.0], [5.0]]).half(),
               "gamma": torch.tensor([6.0])}
    entries, blobs, offset = {}, [], 0
    for name in sorted(tensors, reverse=True):
        blob = tensor_bytes(tensors[name])
        entries[name] = {"dtype": DTYPE_NAME[tensors[name].dtype], "shape": list(tensors[name].shape),
                         "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header = {"beta": entries["beta"], "gamma": entries["gamma"], "alpha": entries["alpha"],
              "__metadata__": {"order": "shuffled"}}
    text = json.dumps(header, indent=1).encode("utf-8") + b"  \n "
    write_raw(os.path.join(OUT, "st_unordered.safetensors"), text, b"".join(blobs))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write_valid()
    write_layout()
    write_unordered()
