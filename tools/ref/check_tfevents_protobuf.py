#!/usr/bin/env python3
"""Checks a `mala train` run directory's TensorBoard event files with Google's protobuf library.

    /usr/bin/python3 tools/ref/check_tfevents_protobuf.py RUN_DIR

Needs Debian's python3-protobuf and protobuf-compiler (protoc). The .proto definitions are
tests/fixtures/tensorboard/{event,summary}.proto (TensorBoard's names and field numbers, the fields
we write), compiled into a temporary folder. The TFRecord framing and CRCs are read by
tools/ref/read_tfevents.py. Checks, exiting 1 with a message at the first failure:
  - every record parses as an Event, and protobuf serialises it back to the same bytes (no unknown
    fields, the fields in order, nothing the library would write otherwise);
  - each file starts with file_version "brain.Event:2"; a later file's SessionLog START at step s
    marks the earlier files' events of steps >= s as superseded (TensorBoard drops them);
  - every log.csv row is in the files as the scalars train/<column>, within the rounding of the
    printed value (6 significant digits, img/s 2 decimals) plus float32's;
  - every image is an RGB PNG whose bytes are those of samples/<step>.png, its height and width
    the PNG's.
Prints one line of counts on success.
"""
import csv
import glob
import importlib
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_tfevents  # noqa: E402

COLUMNS = ["loss", "mse", "vb", "grad_norm", "img_per_s", "lr", "skipped"]


def compile_protos(out):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "tensorboard")
    subprocess.run(["protoc", "-I", here, "--python_out", out, os.path.join(here, "event.proto"),
                    os.path.join(here, "summary.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("event_pb2")


def fail(msg):
    print("error: %s" % msg, file=sys.stderr)
    sys.exit(1)


def main(run):
    files = sorted(glob.glob(os.path.join(run, "events.out.tfevents.*")))
    if not files:
        fail("%s: no event files" % run)
    with tempfile.TemporaryDirectory() as tmp:
        pb = compile_protos(tmp)
        events = []  # per file: [Event]
        for path in files:
            evs = []
            for k, body in read_tfevents.records(path):
                ev = pb.Event.FromString(body)
                ev.DiscardUnknownFields()  # (the library keeps them otherwise, and writes them back)
                if ev.SerializeToString() != body:
                    fail("%s record %d: protobuf writes these fields otherwise (unknown or misordered fields)" % (path, k))
                evs.append(ev)
            if not evs or evs[0].WhichOneof("what") != "file_version" or evs[0].file_version != "brain.Event:2":
                fail("%s: the first record is not file_version brain.Event:2" % path)
            events.append(evs)
        # the events each later file's START supersedes
        scalars, images = {}, {}
        for i, evs in enumerate(events):
            starts = [e.step for later in events[i + 1:] for e in later
                      if e.WhichOneof("what") == "session_log" and e.session_log.status == pb.SessionLog.START]
            cut = min(starts) if starts else None
            for e in evs:
                if e.WhichOneof("what") != "summary" or (cut is not None and e.step >= cut):
                    continue
                for v in e.summary.value:
                    kind = v.WhichOneof("value")
                    if kind == "simple_value":
                        scalars[(e.step, v.tag)] = v.simple_value
                    elif kind == "image":
                        images[e.step] = v.image
                    else:
                        fail("%s: step %d tag %s holds %s" % (files[i], e.step, v.tag, kind))
    rows = 0
    with open(os.path.join(run, "log.csv")) as fh:
        for row in csv.DictReader(fh):
            step = int(row["step"])
            for c in COLUMNS:
                got = scalars.pop((step, "train/" + c), None)
                want = float(row[c])
                if got is None:
                    fail("step %d: no scalar train/%s" % (step, c))
                # log.csv prints 6 significant digits (img/s: 2 decimals); the event holds float32 of the value
                tol = 5e-6 * abs(want) + 6e-8 * abs(want) + (0.005 if c == "img_per_s" else 0)
                if abs(got - want) > tol:
                    fail("step %d train/%s: %r in the events, %r in log.csv" % (step, c, got, want))
            rows += 1
    if scalars:
        fail("scalars without a log.csv row: %s" % sorted(scalars)[:5])
    for step, img in sorted(images.items()):
        png_path = os.path.join(run, "samples", "%07d.png" % step)
        with open(png_path, "rb") as fh:
            png = fh.read()
        w, h = struct.unpack(">II", png[16:24])
        if img.encoded_image_string != png or (img.width, img.height, img.colorspace) != (w, h, 3):
            fail("step %d: the image (%dx%d, colorspace %d, %d bytes) is not %s (%dx%d, %d bytes)" % (
                step, img.width, img.height, img.colorspace, len(img.encoded_image_string), png_path, w, h, len(png)))
    grids = len(glob.glob(os.path.join(run, "samples", "*.png")))
    if len(images) != grids:
        fail("%d images in the events, %d grids in samples/" % (len(images), grids))
    print("%d files, %d records: %d log.csv rows x %d scalars and %d images match log.csv and samples/" % (
        len(files), sum(len(e) for e in events), rows, len(COLUMNS), len(images)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip())
        sys.exit(2)
    main(sys.argv[1])
