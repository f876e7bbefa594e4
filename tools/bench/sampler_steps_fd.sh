#!/bin/sh
# Steps against quality on the bundled model, measured as a distribution: for DDPM-250 (DiT's
# FID setting) and for DDIM and DPM-Solver++(2M) at 5, 10, 20 and 50 steps, N images (labels
# cycling over the classes, seed 0, guidance 1.5, no clipping: DiT's sample_ddp.py defaults),
# the Fashion-MNIST classifier's FD against the 10,000 test images, class accuracy, precision,
# recall and KID (mala eval fid --features fmnist). Every run starts from the same noise.
#   usage: tools/bench/sampler_steps_fd.sh [N_IMAGES [OUT_DIR]]     (default 1000, /tmp/mala_steps_fd)
set -eu
N=${1:-1000}
OUT=${2:-/tmp/mala_steps_fd}
MALA=${MALA_BIN:-./mala}
MODEL=${MODEL:-assets/mala-dit-fmnist.safetensors}
mkdir -p "$OUT"
REF="$OUT/ref-test.npz"
[ -s "$REF" ] || "$MALA" eval stats --data fashion-mnist-test --features fmnist --out "$REF" >/dev/null
run() {  # sampler steps
    f="$OUT/$1_$2.json"
    [ -s "$f" ] && return 0
    "$MALA" eval fid --features fmnist --ckpt "$MODEL" --ref "$REF" --num "$N" --sampler "$1" --steps "$2" \
        --cfg-scale 1.5 --seed 0 > "$f.tmp"
    mv "$f.tmp" "$f"
}
run ddpm 250
for s in 5 10 20 50; do run ddim "$s"; run dpm++2m "$s"; done
printf '| run | FD | class acc | precision | recall | KID |\n|---|---|---|---|---|---|\n'
for r in ddpm_250 ddim_5 ddim_10 ddim_20 ddim_50 dpm++2m_5 dpm++2m_10 dpm++2m_20 dpm++2m_50; do
    j=$(tail -n 1 "$OUT/$r.json")
    get() { printf '%s' "$j" | sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p"; }
    printf '| %s | %.3f | %.4f | %.4f | %.4f | %.5f |\n' "$(echo "$r" | tr _ -)" "$(get fd)" "$(get class_acc)" \
        "$(get precision)" "$(get recall)" "$(get kid_mean)"
done
