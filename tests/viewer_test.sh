#!/usr/bin/env bash
# Smoke test of `mala view` under Xvfb with any model file (the Check suite tests/test_viewer.c
# does the same and more on a model it trains itself; `make test` runs that one).
#
#   tests/viewer_test.sh [MALA_BIN [MODEL.safetensors]]    (defaults: ./mala, the bundled model)
#
# Runs the viewer with a script that generates 4 images of class 0 (DDIM, 5 steps), saves out.png
# and a screenshot, then checks: exit status 0; the screenshot is the window's size; out.png is the
# 2x2 grid torchvision's make_grid(nrow=2, padding=2) gives; the image area of the screenshot is
# not blank (pixel variance > 0, checked with python3 when present). Then the same model twice,
# side by side (--ckpt M --ckpt M): both grids on screen are not blank, and image 1 saved alone
# from each (save_one) is a side x side PNG, the same file for both (same seed, same noise).
# No settings file is read or written (MALA_VIEW_CONFIG=off). Exit 0 on success or SKIP.
set -euo pipefail

bin=${1:-./mala}
model=${2:-assets/mala-dit-fmnist.safetensors}
win_w=800
win_h=600

fail() { echo "FAIL: $*" >&2; exit 1; }

if ! command -v xvfb-run >/dev/null || ! command -v Xvfb >/dev/null; then
    echo "SKIP: xvfb-run / Xvfb not installed (apt-get install xvfb)"
    exit 0
fi
[ -x "$bin" ] || fail "$bin: no such program (build it with make)"
[ -r "$model" ] || fail "$model: no such model file"

export MALA_VIEW_CONFIG=off
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# width and height of a PNG from its IHDR chunk
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{ printf "%dx%d", $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8 }'; }

# xvfb-run -a starts at display 99 and skips lock files; starting elsewhere keeps concurrent runs
# on this machine (other checkouts, the Check suite) from meeting on one display.
server=$((100 + $$ % 800))
script="class=0;cfg=4;steps=5;sampler=ddim;n=4;seed=3;generate;wait;save=$tmp/out.png;quit"
if ! timeout 300 xvfb-run -a -n "$server" -s "-screen 0 1280x1024x24" "$bin" view --ckpt "$model" --threads 1 \
        --width $win_w --height $win_h --script "$script" --screenshot "$tmp/shot.png" >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    fail "mala view exited with an error"
fi
cat "$tmp/log"

side=$("$bin" info "$model" | grep -o '[0-9]*x[0-9]*x[0-9]*' | head -n 1 | cut -d x -f 1)
[ -n "$side" ] || fail "cannot read the image size of $model"
grid=$((2 * (side + 2) + 2))
[ "$(png_size "$tmp/shot.png")" = "${win_w}x${win_h}" ] || fail "screenshot is $(png_size "$tmp/shot.png"), the window ${win_w}x${win_h}"
[ "$(png_size "$tmp/out.png")" = "${grid}x${grid}" ] || fail "out.png is $(png_size "$tmp/out.png"), expected ${grid}x${grid}"

# "view: screenshot FILE WxH, image IWxIH at X,Y scale S"
read -r iw ih ix iy < <(sed -n 's/.*image \([0-9]*\)x\([0-9]*\) at \([0-9]*\),\([0-9]*\) scale.*/\1 \2 \3 \4/p' "$tmp/log" | tail -n 1)
[ -n "${iy:-}" ] || fail "the viewer did not report where it drew the image"

# variance.py SHOT IW IH IX IY [IW IH IX IY ...]: every listed area of the screenshot has pixel
# variance > 0
cat >"$tmp/variance.py" <<'EOF'
import struct, sys, zlib
path, nums = sys.argv[1], list(map(int, sys.argv[2:]))
data = open(path, "rb").read()
pos, idat, w, h = 8, b"", 0, 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype == 2, "expected an 8-bit RGB PNG"
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw, stride, rows, prev = zlib.decompress(idat), 3 * w, [], bytearray(3 * w)
for y in range(h):  # undo the PNG row filters
    f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a, b = row[i - 3] if i >= 3 else 0, prev[i]
        c = prev[i - 3] if i >= 3 else 0
        if f == 1: row[i] = (row[i] + a) & 255
        elif f == 2: row[i] = (row[i] + b) & 255
        elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(row)
    prev = row
ok = True
for k in range(0, len(nums), 4):
    iw, ih, ix, iy = nums[k:k + 4]
    px = [v for y in range(iy, iy + ih) for v in rows[y][3 * ix:3 * (ix + iw)]]
    mean = sum(px) / len(px)
    var = sum((v - mean) ** 2 for v in px) / len(px)
    print(f"image area {iw}x{ih} at {ix},{iy}: pixel variance {var:.1f}")
    ok = ok and var > 0
sys.exit(0 if ok else 1)
EOF

if command -v python3 >/dev/null; then
    python3 "$tmp/variance.py" "$tmp/shot.png" "$iw" "$ih" "$ix" "$iy" || fail "the image area of the screenshot is blank"
else
    echo "python3 not found: pixel variance not checked"
fi

# two panes: the same model twice, one image saved from each
mkdir -p "$tmp/one"
script="class=0;steps=2;sampler=ddim;n=4;seed=3;generate;wait;save_one=1;pane=1;save_one=1;quit"
if ! timeout 300 xvfb-run -a -n "$server" -s "-screen 0 1280x1024x24" "$bin" view --ckpt "$model" --ckpt "$model" \
        --threads 1 --width $win_w --height $win_h --save-dir "$tmp/one" --script "$script" \
        --screenshot "$tmp/side.png" >"$tmp/log2" 2>&1; then
    cat "$tmp/log2" >&2
    fail "mala view with two models exited with an error"
fi
cat "$tmp/log2"
# "view: pane P NAME image IWxIH at X,Y scale S, map ..."
rects=$(sed -n 's/^view: pane [01] .* image \([0-9]*\)x\([0-9]*\) at \([0-9]*\),\([0-9]*\) scale.*/\1 \2 \3 \4/p' "$tmp/log2")
[ "$(wc -l <<<"$rects")" = 2 ] || fail "the viewer did not report where it drew both grids"
if command -v python3 >/dev/null; then
    # shellcheck disable=SC2086
    python3 "$tmp/variance.py" "$tmp/side.png" $rects || fail "a grid of the side-by-side screenshot is blank"
fi
mapfile -t ones < <(ls "$tmp/one"/*.png)
[ "${#ones[@]}" = 2 ] || fail "save_one wrote ${#ones[@]} files, expected 2: ${ones[*]}"
for f in "${ones[@]}"; do
    [ "$(png_size "$f")" = "${side}x${side}" ] || fail "$f is $(png_size "$f"), expected ${side}x${side}"
done
cmp -s "${ones[0]}" "${ones[1]}" || fail "the same model on the same seed gave different images: ${ones[*]}"
echo "viewer_test: PASS (screenshot ${win_w}x${win_h}, out.png ${grid}x${grid}, two panes, one image ${side}x${side})"
