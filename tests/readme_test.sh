#!/usr/bin/env bash
# The commands of README.md and docs/, run as documented from a fresh clone's view of the
# filesystem, so the docs cannot drift from the program (`make test` runs this).
#
#   tests/readme_test.sh [MALA_BIN]      (default ./mala, built from this tree)
#
# The working tree's files (what a `git clone` holds, plus uncommitted and untracked files git
# does not ignore: no runs/, no build/) are copied to a temporary directory with the built binary
# as ./mala. Then, in README order:
#   - `tools/install_deps.sh && make demo`: the installer with --dry-run as this user (and, when
#     root, as an unprivileged user with and without sudo on PATH), and the demo target without
#     a display, shortened through DEMO_FLAGS;
#   - every `./mala ...` line of the sh blocks of README.md and docs/*.md (README first, then the
#     command pages in the order of the old single README; continuation lines joined, comments
#     dropped), with flags appended that shorten it (the last value of a flag wins: fewer steps,
#     images and iterations) and these substitutions for what this machine lacks:
#       /data/imagenet/train              a small RGB image folder sampled from the bundled model
#       sd-vae-ft-ema/diffusion_pytorch_model.safetensors  the tests' tiny VAE (also 8x: 256 -> 4x32x32)
#       RUN/checkpoints/NNNNNNN.safetensors  the newest checkpoint of RUN
#       the FID Inception weights           --inception random
#     A train line of a GPU-sized model (B, L, XL, H presets) runs with --dry-run (flags, data and
#     model checked, nothing trained), and one with --eval-every evaluates 4 images in 2 steps.
#     `mala view` lines run under xvfb-run when it is installed (else they are reported skipped).
# Any command that fails fails the test, and so do docs without train, resume, sample,
# eval, export, info and view commands.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$repo/mala}")
[ -x "$bin" ] || { echo "FAIL: $bin: no such program (build it with make)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/mala_readme_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
clone=$tmp/clone
mkdir -p "$clone"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -xf - -C "$clone"
cp "$bin" "$clone/mala"
cd "$clone"
[ ! -e runs ] || { echo "FAIL: the copy holds runs/" >&2; exit 1; }
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
unset DISPLAY WAYLAND_DISPLAY

fail() { echo "FAIL: $*" >&2; exit 1; }
ran=0
declare -A kinds=()

# ---- the first command: tools/install_deps.sh && make demo ----
grep -q '^tools/install_deps.sh && make demo' README.md || fail "the README's first command is no longer 'tools/install_deps.sh && make demo'"
out=$(tools/install_deps.sh --dry-run) || fail "tools/install_deps.sh --dry-run failed"
if [ "$(id -u)" = 0 ]; then
    grep -q '^env DEBIAN_FRONTEND=noninteractive apt-get install' <<<"$out" || fail "as root the installer should run apt-get without sudo: $out"
    if command -v setpriv >/dev/null; then
        nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
        mkdir -p "$tmp/fakebin" && printf '#!/bin/sh\nexec "$@"\n' >"$tmp/fakebin/sudo" && chmod 755 "$tmp/fakebin" "$tmp/fakebin/sudo"
        chmod 755 "$tmp" "$clone" "$clone/tools"
        out=$("${nobody[@]}" env PATH="$tmp/fakebin:$PATH" tools/install_deps.sh --dry-run) || fail "the installer as a user with sudo failed"
        grep -q '^sudo env DEBIAN_FRONTEND=noninteractive apt-get install' <<<"$out" || fail "a user with sudo should go through sudo: $out"
        nosudo=/usr/bin:/bin
        if PATH=$nosudo command -v sudo >/dev/null; then nosudo=$tmp/nosudo; mkdir -p "$nosudo"; ln -sf /usr/bin/env /usr/bin/id /usr/bin/bash "$nosudo/"; fi
        if err=$("${nobody[@]}" env PATH="$nosudo" tools/install_deps.sh --dry-run 2>&1); then fail "a user without sudo should get an error"; fi
        grep -q 'needs root' <<<"$err" || fail "a user without sudo got: $err"
    fi
else
    grep -q '^sudo env DEBIAN_FRONTEND' <<<"$out" || fail "as a user the installer should use sudo: $out"
fi
make -s -o mala demo DEMO_FLAGS="--n 2 --steps 2 --threads 2" >"$tmp/demo.log" 2>&1 || { cat "$tmp/demo.log"; fail "make demo"; }
[ -s samples.png ] || fail "make demo without a display wrote no samples.png"
# run again: the first grid stays, the second goes to samples-2.png
cp samples.png "$tmp/first.png"
make -s -o mala demo DEMO_FLAGS="--n 2 --steps 2 --threads 2 --seed 1" >"$tmp/demo.log" 2>&1 || { cat "$tmp/demo.log"; fail "make demo, again"; }
cmp -s samples.png "$tmp/first.png" || fail "make demo, run again, replaced samples.png"
[ -s samples-2.png ] && grep -q "wrote samples-2.png" "$tmp/demo.log" || fail "make demo, run again, wrote no samples-2.png: $(cat "$tmp/demo.log")"
rm -f samples-2.png
echo "ok: tools/install_deps.sh (dry run) && make demo (no display: samples.png, then samples-2.png)"

# ---- the ./mala lines ----
# A small RGB image folder for /data/imagenet/train: 3 classes of 6 images from the bundled model.
for k in 0 1 2; do
    ./mala sample --class "$k" --n 6 --sampler ddim --steps 2 --threads 2 --out-dir "$tmp/imagenet-train/class$k" >/dev/null 2>&1 \
        || fail "making the stand-in image folder"
done

newest_step() {  # the newest checkpoint step of a run directory (0 when none)
    local s=0 f
    for f in "$1"/checkpoints/*.safetensors; do [ -e "$f" ] && s=$((10#$(basename "$f" .safetensors))); done
    echo "$s"
}

# README.md, then docs/ in the order a reader meets the commands (later pages use the runs and
# files earlier ones made), then any other page.
docs=(README.md)
for d in train sample bench vae encode view serve eval compare results latent formats testing layout performance gpu \
         distributed; do
    [ -f "docs/$d.md" ] && docs+=("docs/$d.md")
done
for f in docs/*.md; do [[ " ${docs[*]} " == *" $f "* ]] || docs+=("$f"); done

commands=$(awk '
    /^```sh/ { insh = 1; next }
    /^```/   { insh = 0; next }
    insh {
        line = $0
        sub(/[ \t]+#.*$/, "", line); if (line ~ /^[ \t]*#/) next
        if (cont != "") { sub(/^[ \t]+/, "", line); line = cont " " line }
        if (line ~ /\\$/) { sub(/[ \t]*\\$/, "", line); cont = line; next }
        cont = ""
        if (line ~ /^\.\/mala /) print line
    }' "${docs[@]}")
[ -n "$commands" ] || fail "no ./mala commands found in ${docs[*]}"

while IFS= read -r cmd; do
    read -r -a w <<<"$cmd"
    sub=${w[1]}
    line=$cmd
    line=${line//\/data\/imagenet\/train/$tmp/imagenet-train}
    line=${line//sd-vae-ft-ema\/diffusion_pytorch_model.safetensors/tests/fixtures/vae_tiny.safetensors}
    rest=$line line=""
    while [[ $rest =~ ([^ ]+)/checkpoints/[0-9]{7}\.safetensors ]]; do  # left to right, each once
        r=${BASH_REMATCH[1]} s=$(newest_step "${BASH_REMATCH[1]}")
        [ "$s" != 0 ] || fail "$cmd: $r has no checkpoint yet"
        line+=${rest%%"${BASH_REMATCH[0]}"*}$(printf '%s/checkpoints/%07d.safetensors' "$r" "$s")
        rest=${rest#*"${BASH_REMATCH[0]}"}
    done
    line+=$rest
    extra=""
    case "$sub" in
    train)
        out=$(sed -n 's/.*--out \([^ ]*\).*/\1/p' <<<"$line")
        it=$(( $(newest_step "${out:-runs/mala}") + 1 ))
        if [[ $line == *--resume* ]]; then extra="--iters $it --threads 2"; kinds[resume]=1
        else extra="--iters $it --batch 2 --limit 64 --sample-every 0 --log-every 1 --threads 2"; kinds[train]=1; fi
        [[ $line != *--epochs* ]] || extra=${extra/--iters $it/--epochs 1}
        [[ ! $line =~ --model\ [A-Za-z]+-(B|L|XL|H)(/|\ |$) ]] || extra="$extra --dry-run"
        [[ $line != *--eval-every* ]] || extra="$extra --eval-images 4 --eval-steps 2"
        ;;
    sample)
        extra="--steps 2 --batch 2 --threads 2"
        # a count of one stays one: its file is an input of the next command (--init-image)
        [[ $line == *--labels* || $line =~ --n\ 1(\ |$) ]] || extra="$extra --n 2"
        kinds[sample]=1 ;;
    eval)
        extra="--inception random --batch 2 --splits 1 --threads 2"
        [[ ${w[2]} != stats ]] || extra="$extra --limit 8"
        [[ $line != *--ckpt* ]] || extra="$extra --num 2 --sample-batch 2 --steps 2"
        kinds[eval]=1 ;;
    bench)
        case "${w[2]}" in
        train) extra="--batch 2 --steps 1 --threads 2" ;;
        sample) extra="--n 1 --steps 1 --threads 2" ;;
        inception) extra="--batch 1 --iters 1 --warmup 0 --threads 2" ;;
        esac ;;
    compare)  # the long comparisons' commands (configs/compare-fmnist*.ini) run the tiny config into
              # the tiny one's DIR; --report on the committed results rewrites them from their files
        if [[ $line != *--report* ]]; then
            line=$(sed -E 's#configs/compare-fmnist(-[A-Za-z0-9]+)?\.ini#configs/compare-tiny.ini#g
                           s#(results|runs)/compare-fmnist(-[A-Za-z0-9]+)?#runs/compare-tiny#g' <<<"$line")
        fi ;;
    export) kinds[export]=1 ;;
    info) kinds[info]=1 ;;
    view) extra="--threads 2"; kinds[view]=1 ;;
    serve) extra="--threads 2 --port 0"; kinds[serve]=1 ;;
    esac
    full="$line $extra"
    if [ "$sub" = view ]; then
        if ! command -v xvfb-run >/dev/null; then echo "skip (no xvfb-run): $full"; continue; fi
        # LeakSanitizer (make sanitize) reports SDL's own allocations; ASan and UBSan stay on
        full="env ASAN_OPTIONS=\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0 xvfb-run -a -n $((100 + $$ % 800)) -s '-screen 0 1280x1024x24' $full"
    fi
    t0=$(date +%s)
    if [ "$sub" = serve ]; then  # a server: started on a free port, asked /health, stopped by SIGTERM (exit 0)
        bash -c "exec $full" >"$tmp/out.log" 2>&1 &
        spid=$! port=""
        for _ in $(seq 600); do
            port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/out.log")
            [ -n "$port" ] || ! kill -0 $spid 2>/dev/null && break
            sleep 0.1
        done
        reply=""
        if [ -n "$port" ] && exec 3<>"/dev/tcp/127.0.0.1/$port"; then
            printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
            reply=$(timeout 30 cat <&3 || true)
            exec 3<&-
        fi
        kill -TERM $spid 2>/dev/null || true
        src=0; wait $spid || src=$?
        if [[ $reply != "HTTP/1.1 200"* || $src != 0 ]]; then
            tail -n 20 "$tmp/out.log" >&2
            fail "a documented command failed: $cmd  (ran: $full; /health: ${reply%%$'\r'*}; exit $src)"
        fi
        echo "ok ($(( $(date +%s) - t0 )) s): $full (GET /health: 200, SIGTERM: exit 0)"
        ran=$((ran + 1))
        continue
    fi
    if ! eval "timeout 300 $full" >"$tmp/out.log" 2>&1; then
        tail -n 20 "$tmp/out.log" >&2
        fail "a documented command failed: $cmd  (ran: $full)"
    fi
    grep -q $'\r' "$tmp/out.log" && fail "$cmd wrote \\r to a log file"
    echo "ok ($(( $(date +%s) - t0 )) s): $full"
    ran=$((ran + 1))
done <<<"$commands"

for k in train resume sample eval export info view serve; do
    [ -n "${kinds[$k]:-}" ] || fail "the docs have no '$k' command any more (this test runs them all)"
done
echo "readme_test: PASS ($ran commands of README.md and docs/)"
