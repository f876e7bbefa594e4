// MALA_ELEMENTWISE_CLONES: an AVX-512 (x86-64-v4) clone of a CPU op beside the x86-64-v3 one the
// build targets, chosen when the program loads on a CPU that has it (GCC's target_clones). Only
// for loops whose vector lanes never meet: per-element maps, or sums that run within one lane (a
// depthwise conv's taps, channel by channel). With no sum across lanes and no contraction into
// FMAs (-ffp-contract=off), every vector width computes the same bits.
// defines: MALA_ELEMENTWISE_CLONES
#ifndef MALA_CPU_CLONES_H
#define MALA_CPU_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MALA_ELEMENTWISE_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define MALA_ELEMENTWISE_CLONES
#endif

#endif
