// What to draw, as one line of text: the class of every image, or a blend of two classes. The
// command line's --class and --blend, and the server's prompt, read it here, so the same mistake
// gets the same message.
//   ""  or "*"           the classes in equal blocks (`mala sample` without --class)
//   "Sneaker", "7"       one class, by name (case-insensitive) or number
//   "Sneaker,Sandal,0.3" a blend A,B,w: every label embedding is (1 - w) e_A + w e_B (model/net.h)
//   "0.7 Sneaker + 0.3 Sandal"   the same blend written with both weights (w = 0.3 / (0.7 + 0.3))
#ifndef MALA_GEN_PROMPT_H
#define MALA_GEN_PROMPT_H

#include "model/checkpoint.h"

typedef struct {
    int cls;          // the class, or -1 (blocks, or a blend)
    int blend, a, b;  // a blend of classes a and b
    float w;          // b's weight in [0, 1]
} GenPrompt;

// what names the text in messages ("--class", "prompt").
int gen_prompt_parse(const ClassNames *cn, const char *text, const char *what, GenPrompt *out, MalaErr *err);
// One class by name or number; the error lists the classes (10 or fewer) or suggests the closest.
int gen_prompt_class(const ClassNames *cn, const char *text, const char *what, int *k, MalaErr *err);
// "A,B,w" only (the command line's --blend).
int gen_prompt_blend(const ClassNames *cn, const char *text, const char *what, GenPrompt *out, MalaErr *err);

#endif
