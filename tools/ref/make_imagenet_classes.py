#!/usr/bin/python3
"""Writes model/imagenet_classes.c: ImageNet-1k's 1000 class names in label order, from Debian's
python3-torchvision (torchvision.models._meta._IMAGENET_CATEGORIES), so a 1000-class model with
no names of its own (DiT's released files) shows "207 golden retriever". Run once:

    /usr/bin/python3 tools/ref/make_imagenet_classes.py
"""
import json
import os

from torchvision.models._meta import _IMAGENET_CATEGORIES as NAMES

assert len(NAMES) == 1000
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "model", "imagenet_classes.c")
with open(out, "w") as f:
    f.write("// ImageNet-1k's class names in label order, written by tools/ref/make_imagenet_classes.py from\n"
            "// python3-torchvision 0.14's _IMAGENET_CATEGORIES. Do not edit.\n"
            "// defines: imagenet_class_names\n"
            '#include "model/imagenet_classes.h"\n\n'
            "const char *const imagenet_class_names[IMAGENET_CLASSES] = {\n")
    for n in NAMES:
        f.write("    %s,\n" % json.dumps(n, ensure_ascii=True))
    f.write("};\n")
