build-cpu/app/cmd_train.o: app/cmd_train.c app/commands.h app/args.h \
 model/dit.h core/backend.h core/common.h train/data.h model/denoiser.h \
 model/dit.h core/image_io.h core/common.h train/loss_plot.h \
 sampler/sampler.h sampler/diffusion.h core/rng.h train/trainer.h \
 model/checkpoint.h core/safetensors.h sampler/diffusion.h
app/commands.h:
app/args.h:
model/dit.h:
core/backend.h:
core/common.h:
train/data.h:
model/denoiser.h:
model/dit.h:
core/image_io.h:
core/common.h:
train/loss_plot.h:
sampler/sampler.h:
sampler/diffusion.h:
core/rng.h:
train/trainer.h:
model/checkpoint.h:
core/safetensors.h:
sampler/diffusion.h:
