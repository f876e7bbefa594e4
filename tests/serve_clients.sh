#!/bin/sh
# Real clients against `mala serve` on a free 127.0.0.1 port: the official OpenAI SDK for Node
# (npm `openai`) and headless Chromium driving the web page (npm `puppeteer-core` with Debian's
# chromium). The npm packages are installed once into build/npm-serve (pinned versions). Each part
# prints SKIP, and the script exits 0, where node, npm's registry or chromium is missing.
# Usage: tests/serve_clients.sh MALA [SCREENSHOT.png]
set -eu
mala=$1
shot=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "SKIP serve clients: node / npm not installed"; exit 0
fi
npmdir=$root/build/npm-serve
if [ ! -d "$npmdir/node_modules/openai" ] || [ ! -d "$npmdir/node_modules/puppeteer-core" ]; then
    mkdir -p "$npmdir"
    if ! (cd "$npmdir" && timeout 300 npm install --no-audit --no-fund --silent openai@6.49.0 puppeteer-core@24.43.1 >/dev/null 2>&1); then
        echo "SKIP serve clients: npm could not install openai and puppeteer-core (no registry?)"; exit 0
    fi
fi
tmp=$(mktemp -d /tmp/mala_serve_clients_XXXXXX)
"$mala" serve --model "$root/assets/mala-dit-fmnist.safetensors" --port 0 --threads 2 2>"$tmp/log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=
for _ in $(seq 300); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/log")
    [ -n "$port" ] && break
    if ! kill -0 $pid 2>/dev/null; then
        if grep -q "built without libmicrohttpd" "$tmp/log"; then echo "SKIP serve clients: mala was built without libmicrohttpd"; exit 0; fi
        cat "$tmp/log" >&2; exit 1
    fi
    sleep 0.1
done
[ -n "$port" ] || { echo "mala serve did not start" >&2; cat "$tmp/log" >&2; exit 1; }
cp "$here/serve_openai.mjs" "$here/serve_browser.mjs" "$npmdir/"  # beside node_modules, where imports resolve
node "$npmdir/serve_openai.mjs" "$port" "$tmp"
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
    echo "SKIP serve browser: chromium not installed (tools/install_deps.sh installs it)"
else
    node "$npmdir/serve_browser.mjs" "$port" "$chromium" "${shot:-$tmp/serve.png}"
fi
kill -TERM $pid
wait $pid
trap 'rm -rf "$tmp"' EXIT
echo "serve clients: passed"
