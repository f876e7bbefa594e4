"""Tiny safetensors reader/writer (numpy; torch only where asked for).

The `safetensors` package is not installed on our machines, so this file implements the format
by hand. Layout of a file:

    u64 little-endian N                      length of the header in bytes
    N bytes of JSON                          {"__metadata__": {str: str, ...},
                                              name: {"dtype": "F32", "shape": [..],
                                                     "data_offsets": [begin, end]}, ...}
                                             padded with spaces so that 8 + N is a multiple of 8
    tensor data                              contiguous, row-major, little-endian; offsets are
                                             relative to the first byte after the header

`save()` writes tensors sorted by name, data in the same order with no gaps, which is what the
C side (and the Rust `safetensors` crate) writes too.

Reading a file the C program wrote, from PyTorch:

    import sys; sys.path.insert(0, "tools")
    import st_io, ref_dit
    sd, meta = st_io.load_state_dict("run/ckpt.safetensors")     # EMA weights when present
    model = ref_dit.DiT.from_metadata(meta)
    model.load_state_dict(sd)                                   # strict: names and shapes match

`load_state_dict(path, which="auto")` keeps only the model's tensors: with which="auto" it takes
`ema.<name>` when the file has EMA weights and the plain names otherwise; which="online" forces
the plain names, which="ema" insists on EMA. Optimiser moments (`opt.m.*`, `opt.v.*`) and test
tensors (`in.*`, `out`, `grad.*`) are left out.
"""

import json
import struct

import numpy as np

_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def _dtype_name(dt):
    dt = np.dtype(dt).newbyteorder("<") if np.dtype(dt).byteorder == ">" else np.dtype(dt)
    for name, d in _DTYPES.items():
        if d == dt:
            return name
    raise TypeError(f"st_io: dtype {dt} has no safetensors name")


def save(path, tensors, metadata=None):
    """Writes {name: array-like} (numpy arrays or torch tensors) and a {str: str} metadata map."""
    arrays = {}
    for name, t in tensors.items():
        if hasattr(t, "detach"):  # torch tensor
            t = t.detach().cpu().numpy()
        a = np.array(t, order="C", copy=False)  # ascontiguousarray would make 0-d arrays 1-d
        arrays[name] = a.astype(a.dtype.newbyteorder("<"), copy=False)
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"st_io: metadata must map str to str (key {k!r})")
        header["__metadata__"] = dict(metadata)
    offset = 0
    order = sorted(arrays)
    for name in order:
        a = arrays[name]
        header[name] = {"dtype": _dtype_name(a.dtype), "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for name in order:
            f.write(arrays[name].tobytes(order="C"))


def load(path):
    """Returns ({name: numpy array}, {str: str} metadata). BF16 is widened to float32."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    meta = header.pop("__metadata__", None) or {}
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        dt = info["dtype"]
        if not 0 <= b <= e <= len(data):
            raise ValueError(f"{path}: tensor {name}: data_offsets {b},{e} out of range")
        raw = data[b:e]
        if dt == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            a = u.view(np.float32)
        elif dt in _DTYPES:
            a = np.frombuffer(raw, dtype=_DTYPES[dt])
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        count = int(np.prod(shape)) if shape else 1
        if a.size != count:
            raise ValueError(f"{path}: tensor {name}: {a.size} elements for shape {list(shape)}")
        out[name] = a.reshape(shape).copy()
    return out, meta


_NOT_MODEL = ("opt.", "in.", "grad.")


def load_state_dict(path, which="auto", device="cpu"):
    """Returns (state_dict of torch tensors, metadata) for a DiT file written by the C program
    (checkpoint, exported model) or by tools/ref/ref_dit.py. See the module docstring."""
    import torch

    arrays, meta = load(path)
    has_ema = any(k.startswith("ema.") for k in arrays)
    if which not in ("auto", "online", "ema"):
        raise ValueError("which must be 'auto', 'online' or 'ema'")
    if which == "ema" and not has_ema:
        raise ValueError(f"{path}: no ema.* tensors")
    use_ema = has_ema and which != "online"
    sd = {}
    for k, a in arrays.items():
        if k == "out" or k.startswith(_NOT_MODEL):
            continue
        if k.startswith("ema."):
            if use_ema:
                sd[k[4:]] = torch.from_numpy(a).to(device)
        elif not use_ema:
            sd[k] = torch.from_numpy(a).to(device)
    if use_ema and "pos_embed" in arrays and "pos_embed" not in sd:
        sd["pos_embed"] = torch.from_numpy(arrays["pos_embed"]).to(device)
    return sd, meta


if __name__ == "__main__":
    import sys

    for p in sys.argv[1:]:
        ts, md = load(p)
        print(p)
        for k, v in md.items():
            print(f"  meta {k} = {v}")
        for k in sorted(ts):
            a = ts[k]
            print(f"  {k:48s} {str(a.dtype):8s} {list(a.shape)}")
