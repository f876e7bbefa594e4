// The configuration of a DiT state dict saved by PyTorch (DiT's released DiT-XL-2-256x256.pt, a
// DiT / fast-DiT training checkpoint's ema), inferred from its tensors' names and shapes, since
// such files carry no metadata:
//   hidden, in_channels, patch   x_embedder.proj.weight [hidden, C, p, p]
//   depth                        blocks.{0..depth-1}.attn.qkv.weight, contiguous from 0
//   num_classes                  y_embedder.embedding_table.weight rows - 1 (the null row)
//   latent grid                  pos_embed [1, T, hidden], T = grid^2; image_size = grid * patch
//   learn_sigma                  final_layer.linear.weight rows = p^2 * 2C
//   heads                        `heads` when > 0, else the checkpoint's args.model ("DiT-XL/2"),
//                                else DiT's preset for the hidden size (384 6, 768 12, 1024 16, 1152 16)
// Attention is DiT's (softmax, RoPE, LePE and gate off). A 4-channel input is taken as SD-VAE
// latents (latent_scale 0.18215, the VAE's 8x: 32x32 latents are 256x256 images). DiG's and DiC's
// names are recognised and refused for now; anything else is refused naming the first tensor that
// fits no backbone.
#ifndef MALA_TORCH_CONFIG_H
#define MALA_TORCH_CONFIG_H

#include "model/net.h"
#include "formats/torch_legacy.h"

int torch_infer_config(const TorchLegacy *t, int heads, NetConfig *c, MalaErr *err);

#endif
