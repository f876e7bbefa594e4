// The configuration of a state dict saved by PyTorch (DiT's released DiT-XL-2-256x256.pt, a DiT /
// fast-DiT training checkpoint's ema, DiG's and DiC's), inferred from its tensors' names and shapes,
// since such files carry no metadata. The backbone from the names: DiC's t_embedder_ls.0.mlp.0.weight,
// DiG's blocks.0.attn.q_proj.weight, DiT's blocks.0.attn.qkv.weight (ours are the official names:
// model/dit.c, dig.c, dic.c). DiT and DiG:
//   hidden, in_channels, patch   x_embedder.proj.weight [hidden, C, p, p]
//   depth                        blocks.{0..depth-1}.attn.qkv.weight (DiG: .q_proj.weight), contiguous from 0
//   num_classes                  y_embedder.embedding_table.weight rows - 1 (the null row)
//   latent grid                  pos_embed [1, T, hidden], T = grid^2; image_size = grid * patch
//   learn_sigma                  final_layer.linear.weight rows = p^2 * 2C
//   heads (DiT)                  `heads` when > 0, else the checkpoint's args.model ("DiT-XL/2"),
//                                else DiT's preset for the hidden size (384 6, 768 12, 1024 16, 1152 16)
//   heads (DiG)                  `heads` when > 0, else hidden / blocks.0.attn.g_norm_swish_gate.weight's size
// DiT's attention is DiT's (softmax, RoPE, LePE and gate off). DiC (model/torch_config_dic.c):
//   in_channels                  x_embedder.proj.weight [W0, C, 3, 3]
//   stages n = 2L - 1            L time embedders t_embedder_ls.{0..L-1}
//   depths, stage widths W[s]    enc_blocks.{s}.{b} / lat_blocks.0.{b} / dec_blocks.{s-L}.{b}, conv1 rows
//   hidden, multipliers          gcd of the widths, W[s] / hidden (the same network for any split)
//   skip_stride                  the first decoder block b > 0 with a skip conv (a concatenation)
//   num_classes, learn_sigma     y_embedder_ls.0.embedding_table.weight rows - 1; final_layer.out_proj rows
//   image_size                   args.image_size of a training checkpoint (/8 for 4 channels), else 32
// A 4-channel input is taken as SD-VAE latents (latent_scale 0.18215, the VAE's 8x: 32x32 latents
// are 256x256 images). torch_check_fit then checks the inferred model against every tensor.
#ifndef MALA_TORCH_CONFIG_H
#define MALA_TORCH_CONFIG_H

#include "model/net.h"
#include "formats/torch_legacy.h"

int torch_infer_config(const TorchLegacy *t, int heads, NetConfig *c, MalaErr *err);
// Every tensor of the file, in file order, is one of model c's with its shape, and none of c's is
// missing: else "fits no backbone" naming the first that does not fit, or the first c has and the
// file lacks. c must be valid (net_config_validate).
int torch_check_fit(const TorchLegacy *t, const NetConfig *c, MalaErr *err);
// DiC's part: c's backbone, DiC fields, channels, classes, learned sigma and image size.
int torch_infer_dic(const TorchLegacy *t, NetConfig *c, MalaErr *err);

#endif
