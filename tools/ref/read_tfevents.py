#!/usr/bin/env python3
"""Reads TensorBoard event files (events.out.tfevents.*) without TensorFlow, TensorBoard or protobuf.

An independent check of the files `mala train` writes (formats/tfevents.c): the TFRecord framing with
both masked CRC-32Cs (computed here bit by bit, not with the C code's table), the Event / Summary /
Image / SessionLog fields by a generic protocol-buffer wire-format walk, and each image's PNG
(signature, every chunk's CRC-32, IHDR's size equal to the Image message's height and width).

    /usr/bin/python3 tools/ref/read_tfevents.py RUN_DIR_OR_FILE...

prints one line per record and exits 1 at the first malformed record (naming file, record, problem).
"""
import glob
import os
import struct
import sys
import zlib


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(b, i):
    v = s = 0
    while True:
        if i >= len(b) or s > 63:
            raise ValueError("truncated varint")
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            return v, i


def fields(b):
    """Yields (field number, wire type, value): int for varint/fixed, bytes for length-delimited."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w in (1, 5):
            n = 8 if w == 1 else 4
            if i + n > len(b):
                raise ValueError("truncated fixed field")
            v = int.from_bytes(b[i:i + n], "little")
            i += n
        elif w == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise ValueError("truncated bytes field")
            v = b[i:i + n]
            i += n
        else:
            raise ValueError("wire type %d" % w)
        yield f, w, v


def check_png(png, height, width):
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("image: not a PNG")
    i, names = 8, []
    while i + 12 <= len(png):
        n, = struct.unpack(">I", png[i:i + 4])
        name, body = png[i + 4:i + 8], png[i + 8:i + 8 + n]
        crc, = struct.unpack(">I", png[i + 8 + n:i + 12 + n])
        if zlib.crc32(name + body) != crc:
            raise ValueError("image: PNG chunk %s CRC mismatch" % name.decode("latin-1"))
        if name == b"IHDR":
            w, h = struct.unpack(">II", body[:8])
            if (w, h) != (width, height):
                raise ValueError("image: PNG is %dx%d, the message says %dx%d" % (w, h, width, height))
        names.append(name.decode("latin-1"))
        i += 12 + n
    if not names or names[-1] != "IEND":
        raise ValueError("image: PNG without IEND")
    return names


def value(b):
    tag, out = None, None
    for f, w, v in fields(b):
        if f == 1 and w == 2:
            tag = v.decode("utf-8")
        elif f == 2 and w == 5:
            out = "%.6g" % struct.unpack("<f", struct.pack("<I", v))[0]
        elif f == 4 and w == 2:
            img = {g: x for g, _, x in fields(v)}
            png = img.get(4, b"")
            names = check_png(png, img.get(1, 0), img.get(2, 0))
            out = "image %dx%d colorspace %d, PNG %d bytes (%s)" % (
                img.get(2, 0), img.get(1, 0), img.get(3, 0), len(png), " ".join(names))
    return "%s = %s" % (tag, out)


def event(b):
    step, wall, parts = 0, None, []
    for f, w, v in fields(b):
        if f == 1 and w == 1:
            wall = struct.unpack("<d", struct.pack("<Q", v))[0]
        elif f == 2 and w == 0:
            step = v - (1 << 64) if v >> 63 else v
        elif f == 3 and w == 2:
            parts.append("file_version %s" % v.decode("utf-8"))
        elif f == 5 and w == 2:
            parts += [value(x) for g, _, x in fields(v) if g == 1]
        elif f == 7 and w == 2:
            status = {g: x for g, _, x in fields(v)}.get(1, 0)
            parts.append("session_log status %s" % {1: "START"}.get(status, status))
    if wall is None:
        raise ValueError("Event without wall_time")
    return "step %d wall_time %.3f: %s" % (step, wall, "; ".join(parts))


def records(path):
    """Yields (index, Event bytes) of every record, both CRCs checked."""
    with open(path, "rb") as fh:
        data = fh.read()
    i, k = 0, 0
    while i < len(data):
        if i + 12 > len(data):
            raise ValueError("record %d: truncated header" % k)
        n, = struct.unpack("<Q", data[i:i + 8])
        lc, = struct.unpack("<I", data[i + 8:i + 12])
        if lc != masked(crc32c(data[i:i + 8])):
            raise ValueError("record %d: length CRC mismatch" % k)
        body = data[i + 12:i + 12 + n]
        if len(body) != n or i + 16 + n > len(data):
            raise ValueError("record %d: truncated" % k)
        dc, = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if dc != masked(crc32c(body)):
            raise ValueError("record %d: data CRC mismatch" % k)
        yield k, body
        i += 16 + n
        k += 1


def read(path):
    """Yields (index, a line describing the Event) of every record."""
    for k, body in records(path):
        try:
            line = event(body)
        except ValueError as e:
            raise ValueError("record %d: %s" % (k, e))
        if k == 0 and "file_version brain.Event:2" not in line:
            raise ValueError("record 0 is not the file_version record")
        yield k, line


def main(args):
    if not args:
        print(__doc__.strip())
        return 2
    files = []
    for a in args:
        files += sorted(glob.glob(os.path.join(a, "events.out.tfevents.*"))) if os.path.isdir(a) else [a]
    for path in files:
        print(path)
        try:
            for k, line in read(path):
                print("  %d %s" % (k, line))
        except ValueError as e:
            print("error: %s: %s" % (path, e), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
