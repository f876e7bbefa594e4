// ImageNet-1k's class names in label order (model/imagenet_classes.c, generated from Debian's
// python3-torchvision by tools/ref/make_imagenet_classes.py): the names a 1000-class model without
// names of its own gets (label 207 is "golden retriever").
#ifndef MALA_IMAGENET_CLASSES_H
#define MALA_IMAGENET_CLASSES_H

#define IMAGENET_CLASSES 1000
extern const char *const imagenet_class_names[IMAGENET_CLASSES];

#endif
