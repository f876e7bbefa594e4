"""numpy references for eval/prdc.c (precision/recall) and eval/kid.c (KID): writes
tests/fixtures/metrics_ref.npz with two small feature sets and the metrics computed here.

Precision/recall follow guided-diffusion's evaluations/evaluator.py (ManifoldEstimator.manifold_radii
with np.partition, evaluate_pr's <= tests on squared distances); KID follows torch-fidelity's
metric_kid.py (polynomial kernel degree 3, gamma 1/d, coef0 1, unbiased MMD^2, mean and std over
subsets). The subsets are drawn as eval/kid.c draws them (partial Fisher-Yates on the shared
generator of tools/ref/make_inception_fixtures.py), so both sides use the same rows.

    /usr/bin/python3 tools/ref/ref_metrics.py      (numpy only)
"""

import numpy as np

M64 = (1 << 64) - 1


def fnv1a64(s):
    """eval_rand_seed(name): FNV-1a 64 (as tools/ref/make_inception_fixtures.py, which needs scipy)."""
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & M64
    return h


def rand_u(seed, i):
    """eval_rand_u(seed, i) of eval/inception.c."""
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z = z ^ (z >> 31)
    return (z >> 40) * 2.0 ** -24


def sq_dist(u, v):
    nu = (u.astype(np.float64) ** 2).sum(1)[:, None]
    nv = (v.astype(np.float64) ** 2).sum(1)[None, :]
    return np.maximum(nu - 2 * u.astype(np.float64) @ v.astype(np.float64).T + nv, 0.0)


def precision_recall(ref, gen, k=3):
    def radii(x):
        return np.partition(sq_dist(x, x), np.arange(k + 1), axis=1)[:, k]
    r_ref, r_gen = radii(ref), radii(gen)
    d = sq_dist(ref, gen)                              # [n_ref, n_gen]
    precision = np.mean(np.any(d <= r_ref[:, None], axis=0))
    recall = np.mean(np.any(d <= r_gen[None, :], axis=1))
    return float(precision), float(recall)


def draw(n, m, seed, counter):
    perm = np.arange(n)
    for t in range(m):
        j = min(t + int(rand_u(seed, counter) * (n - t)), n - 1)
        counter += 1
        perm[t], perm[j] = perm[j], perm[t]
    return perm[:m].copy(), counter


def mmd2_unbiased(kxx, kyy, kxy):
    m = kxx.shape[0]
    return ((kxx.sum() - np.trace(kxx)) + (kyy.sum() - np.trace(kyy))) / (m * (m - 1)) - 2 * kxy.sum() / (m * m)


def kid(x, y, subsets, m, seed):
    s = (fnv1a64("kid") + seed) & M64
    counter = 0
    d = x.shape[1]
    kern = lambda a, b: (a.astype(np.float64) @ b.astype(np.float64).T / d + 1.0) ** 3  # noqa: E731
    mmds = []
    for _ in range(subsets):
        ix, counter = draw(len(x), m, s, counter)
        iy, counter = draw(len(y), m, s, counter)
        fx, fy = x[ix], y[iy]
        mmds.append(mmd2_unbiased(kern(fx, fx), kern(fy, fy), kern(fx, fy)))
    return float(np.mean(mmds)), float(np.std(mmds))


def main():
    rng = np.random.RandomState(7)
    ref = rng.randn(300, 16).astype(np.float32)
    gen = (0.8 * rng.randn(250, 16) + 0.3).astype(np.float32)
    p, r = precision_recall(ref, gen)
    km, ks = kid(ref, gen, 10, 250, 0)
    km2, ks2 = kid(ref, gen, 20, 40, 5)
    out = {"ref": ref, "gen": gen, "precision": np.float64(p), "recall": np.float64(r),
           "kid_mean": np.float64(km), "kid_std": np.float64(ks), "kid40_mean": np.float64(km2),
           "kid40_std": np.float64(ks2)}
    np.savez("tests/fixtures/metrics_ref.npz", **out)
    print(f"precision {p:.6f} recall {r:.6f}  KID (10 x 250) {km:.6e} +- {ks:.6e}  (20 x 40, seed 5) "
          f"{km2:.6e} +- {ks2:.6e}")


if __name__ == "__main__":
    main()
