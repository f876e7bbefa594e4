#!/usr/bin/env bash
# Whether two mala binaries compute the same bits: each trains DiT-T/4 (MALA with the output gate),
# DiT-T/4 softmax, DiG-T/4 and DiC-T for 6 steps on 64 Fashion-MNIST images (batch 8, 1 and 2
# threads; lr 2e-3 and EMA decay 0, so that the evaluated weights are trained ones), the checkpoints
# are compared byte for byte, and each binary evaluates every checkpoint
# (`eval fid --features fmnist`, 40 DDIM-5 samples): the FD and class accuracy must agree to the
# last digit. A long comparison (`mala compare`) may continue on a new binary only when this
# passes: otherwise its runs lose bit-exact resume. Exit 0 when the same, 1 when not.
#   usage: tools/same_bits.sh OLD_MALA NEW_MALA
set -euo pipefail
[ $# = 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
old=$(realpath "$1") new=$(realpath "$2")
for b in "$old" "$new"; do [ -x "$b" ] || { echo "same_bits.sh: $b: not an executable" >&2; exit 2; }; done
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/mala_same_bits_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
configs=("dit-mala-gate:--model DiT-T/4 --attn mala --gate 1" "dit-softmax:--model DiT-T/4 --attn softmax"
         "dig:--model DiG-T/4" "dic:--model DiC-T")
same=1
"$old" eval stats --features fmnist --data fashion-mnist-test --limit 200 --out "$tmp/ref.npz" >/dev/null 2>&1
for cfg in "${configs[@]}"; do
    name=${cfg%%:*} flags=${cfg#*:}
    for t in 1 2; do
        for which in old new; do
            bin=$old; [ $which = new ] && bin=$new
            # shellcheck disable=SC2086
            "$bin" train $flags --batch 8 --iters 6 --limit 64 --lr 2e-3 --ema-decay 0 --ckpt-every 6 \
                --sample-every 0 --log-every 3 --threads $t --out "$tmp/$which-$name-t$t" >/dev/null 2>&1 ||
                { echo "same_bits.sh: $which: training $name failed" >&2; exit 2; }
        done
        ck=checkpoints/0000006.safetensors
        if cmp -s "$tmp/old-$name-t$t/$ck" "$tmp/new-$name-t$t/$ck"; then r=same; else r=DIFFERENT; same=0; fi
        fd=()
        for which in old new; do
            bin=$old; [ $which = new ] && bin=$new
            fd+=("$("$bin" eval fid --ckpt "$tmp/old-$name-t$t/$ck" --features fmnist --ref "$tmp/ref.npz" --num 40 \
                --sample-batch 20 --sampler ddim --steps 5 --cfg-scale 1.5 --threads $t 2>/dev/null | tail -n 1 |
                grep -o '"fd":[^,]*,"class_acc":[^,]*')")
        done
        [ "${fd[0]}" = "${fd[1]}" ] || { r="$r, evaluation DIFFERENT (${fd[0]} / ${fd[1]})"; same=0; }
        echo "$name, $t thread(s): checkpoint $r; eval ${fd[1]}"
    done
done
if [ $same = 1 ]; then echo "same_bits.sh: the same bits"; else echo "same_bits.sh: NOT the same bits"; exit 1; fi
