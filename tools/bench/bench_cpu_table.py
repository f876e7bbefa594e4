#!/usr/bin/python3
"""The Markdown table of tools/bench/bench_cpu.sh's runs (bench-cpu.jsonl): per benchmark, mala fp32 and
bf16 against PyTorch eager fp32 and autocast bf16, each the median over the rounds with
[min .. max], the ratios of those medians, and mala's GFLOP/s with the fraction of the GEMM rate
in the same precision (`sgemm_gflops` of the `mala bench train` runs of that precision, measured
in their own process; oneDNN's matmul in a oneDNN build).

    /usr/bin/python3 tools/bench/bench_cpu_table.py bench-cpu.jsonl

The `int8 ...` runs (CASES=int8) get a table of their own: sampling in fp32, bf16 and int8 on both sides
(PyTorch's int8: quantize_dynamic), mala int8 against PyTorch's fastest mode and against mala's fp32 and
fastest non-int8 mode, and the in-process linear rates of `mala bench gemm` in the three precisions.

The `tokens N ATTN` runs (CASES=tokens: one plain step of one image) get a table of their own: seconds
per image at each token count for softmax and MALA attention, their ratio, and how each grows from the
smallest count.
"""
import json
import statistics
import sys

COLS = [("mala", "fp32"), ("mala", "bf16"), ("torch", "fp32"), ("torch", "bf16")]


def med(v):
    return statistics.median(v) if v else None


def fmt(v):
    return "-" if v is None else f"{v:.3g}" if v < 100 else f"{v:.0f}"


def cell(v, err):
    if not v:
        return f"failed: {err}" if err else "-"
    return f"{fmt(med(v))} [{fmt(min(v))} .. {fmt(max(v))}]" if len(v) > 1 else fmt(v[0])


def ratio(a, b):
    return f"{med(a) / med(b):.2f}x" if a and b else "-"


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
    cases = [c for c in dict.fromkeys(r["case"] for r in rows) if not c.startswith(("tokens ", "int8 "))]
    rounds = max((r["round"] for r in rows), default=0)
    ceil = {p: [r["sgemm_gflops"] for r in rows if r.get("bench") == "train" and r["who"] == "mala"
                and r["prec"] == p and "sgemm_gflops" in r] for p in ("fp32", "bf16")}
    busy = any(r.get("busy") for r in rows)
    mallocs = sorted({r.get("torch_malloc", "glibc (not recorded)") for r in rows if r["who"] == "torch"})
    if mallocs:
        print(f"PyTorch's malloc: {', '.join(mallocs)}.")
    if cases:
        print(f"img/s, median of {rounds} interleaved rounds [min .. max]" + (" (BUSY machine)" if busy else "") + ".")
        if any(ceil.values()):
            print("GEMM rate in the same precision (`mala bench train`'s in-process measurement, median): " +
                  ", ".join(f"{p} {fmt(med(v))} GFLOP/s" for p, v in ceil.items() if v) + ".")
        print()
        print("| benchmark | mala fp32 | mala bf16 | PyTorch fp32 | PyTorch autocast bf16 | mala bf16 / PyTorch bf16 "
              "| mala bf16 / PyTorch fp32 | mala fp32 / PyTorch fp32 | mala GFLOP/s fp32, bf16 (of the GEMM rate) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for case in cases:
            rs = [r for r in rows if r["case"] == case]
            kind = case.split()[0]
            keys = {"train": [("img_per_s", "")], "sample": [("img_per_s_cfg", ", guided (2 passes)"),
                                                             ("img_per_s", ", plain")],
                    "vae": [("decode_img_per_s", " decode"), ("encode_img_per_s", " encode")],
                    "inception": [("img_per_s", "")]}[kind]
            for key, what in keys:
                v, err = {}, {}
                for who, p in COLS:
                    sel = [r for r in rs if r["who"] == who and r["prec"] == p]
                    v[who, p] = [r[key] for r in sel if key in r]
                    err[who, p] = next((r["error"] for r in sel if "error" in r), None)
                gf = []
                for p in ("fp32", "bf16"):
                    sel = [r for r in rs if r["who"] == "mala" and r["prec"] == p]
                    g = None
                    if kind == "train":
                        g = med([r["gflops"] for r in sel if "gflops" in r])
                    elif kind == "sample":  # forward GFLOP/img (train's count is 3 forwards) x steps x passes x img/s
                        tr = [r for r in rows if r["case"] == "train" + case[6:] and r["who"] == "mala"
                              and r["prec"] == p and "gflop_per_img" in r]
                        if tr and v["mala", p]:
                            g = tr[0]["gflop_per_img"] / 3 * sel[0]["steps"] * (2 if "cfg" in key else 1) * med(v["mala", p])
                    elif kind == "vae":
                        g = med([r[key.replace("img_per_s", "gflops")] for r in sel if key.replace("img_per_s", "gflops") in r])
                    else:
                        g = med([r["gflop_per_s"] for r in sel if "gflop_per_s" in r])
                    gf.append("-" if g is None else f"{g:.0f}" + (f" ({g / med(ceil[p]):.0%})" if ceil[p] else ""))
                print(f"| {case}{what} | " + " | ".join(cell(v[c], err[c]) for c in COLS) +
                      f" | {ratio(v['mala', 'bf16'], v['torch', 'bf16'])} | {ratio(v['mala', 'bf16'], v['torch', 'fp32'])}"
                      f" | {ratio(v['mala', 'fp32'], v['torch', 'fp32'])} | {', '.join(gf)} |")
    int8_table(rows)
    tokens_table(rows)


def int8_table(rows):
    rs = [r for r in rows if r["case"].startswith("int8 sample ")]
    if rs:
        rounds = max(r["round"] for r in rs)
        cols = [(w, p) for w in ("mala", "torch") for p in ("fp32", "bf16", "int8")]
        print()
        print(f"int8 sampling, img/s, median of {rounds} interleaved rounds [min .. max]; PyTorch bf16 is its autocast, "
              "its int8 quantize_dynamic on the blocks' linears:")
        print()
        print("| benchmark | mala fp32 | mala bf16 | mala int8 | PyTorch fp32 | PyTorch bf16 | PyTorch int8 "
              "| mala int8 / PyTorch's fastest | mala int8 / mala fp32 | mala int8 / mala's fastest other |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for case in dict.fromkeys(r["case"] for r in rs):
            for key, what in (("img_per_s_cfg", ", guided (2 passes)"), ("img_per_s", ", plain")):
                v, err = {}, {}
                for who, p in cols:
                    sel = [r for r in rs if r["case"] == case and r["who"] == who and r["prec"] == p]
                    v[who, p] = [r[key] for r in sel if key in r]
                    err[who, p] = next((r["error"] for r in sel if "error" in r), None)
                best_t = max((c for c in cols if c[0] == "torch" and v[c]), key=lambda c: med(v[c]), default=None)
                best_m = max((c for c in cols[:2] if v[c]), key=lambda c: med(v[c]), default=None)
                print(f"| {case[12:]}{what} | " + " | ".join(cell(v[c], err[c]) for c in cols) +
                      f" | {ratio(v['mala', 'int8'], v[best_t]) + f' ({best_t[1]})' if best_t else '-'}"
                      f" | {ratio(v['mala', 'int8'], v['mala', 'fp32'])}"
                      f" | {ratio(v['mala', 'int8'], v[best_m]) + f' ({best_m[1]})' if best_m else '-'} |")
    g = [l for r in rows if r["case"] == "int8 gemm" for l in r.get("lines", [])]
    if g:
        print()
        print("The CPU's linear forward in this process (`mala bench gemm`, x W^T at DiT-S/2's block shapes, "
              f"{g[0]['m']} tokens), GFLOP/s, median over the rounds:")
        print()
        print("| layer (M x K x N) | fp32 | bf16 | int8 | bf16 / fp32 | int8 / fp32 |")
        print("|---|---:|---:|---:|---:|---:|")
        for layer in dict.fromkeys(l["layer"] for l in g):
            ls = [l for l in g if l["layer"] == layer]
            f, b, i = (med([l[k + "_gflops"] for l in ls]) for k in ("fp32", "bf16", "int8"))
            print(f"| {layer} ({ls[0]['m']} x {ls[0]['k']} x {ls[0]['n']}) | {f:.0f} | {b:.0f} | {i:.0f} "
                  f"| {b / f:.2f}x | {i / f:.2f}x |")


def tokens_table(rows):
    runs = {}
    for r in rows:
        if r["case"].startswith("tokens ") and "img_per_s" in r:
            _, n, attn = r["case"].split()
            runs.setdefault((int(n), attn), []).append(1 / r["img_per_s"])
    counts = sorted({n for n, _ in runs})
    if not counts:
        return
    print()
    print("Seconds per image of one plain step (one forward pass), DiT-XL/2 width and depth, median of the rounds:")
    print()
    print("| tokens | softmax s/img | MALA s/img | softmax / MALA | softmax growth | MALA growth |")
    print("|---:|---:|---:|---:|---:|---:|")
    base = {a: med(runs.get((counts[0], a), [])) for a in ("softmax", "mala")}
    for n in counts:
        s, m = med(runs.get((n, "softmax"), [])), med(runs.get((n, "mala"), []))
        grow = [f"{v / base[a]:.1f}x" if v and base[a] else "-" for v, a in ((s, "softmax"), (m, "mala"))]
        print(f"| {n} | {fmt(s)} | {fmt(m)} | {f'{s / m:.2f}x' if s and m else '-'} | {grow[0]} | {grow[1]} |")


if __name__ == "__main__":
    main()
