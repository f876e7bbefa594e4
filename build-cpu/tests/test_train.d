build-cpu/tests/test_train: tests/test_train.c core/backend.h \
 app/commands.h app/args.h model/dit.h core/common.h train/data.h \
 core/safetensors.h core/common.h tests/testutil.h train/trainer.h \
 model/checkpoint.h model/dit.h sampler/diffusion.h core/rng.h
core/backend.h:
app/commands.h:
app/args.h:
model/dit.h:
core/common.h:
train/data.h:
core/safetensors.h:
core/common.h:
tests/testutil.h:
train/trainer.h:
model/checkpoint.h:
model/dit.h:
sampler/diffusion.h:
core/rng.h:
