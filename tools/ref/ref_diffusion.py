#!/usr/bin/python3
"""Reference fixtures for tests/test_diffusion.c (run with /usr/bin/python3: numpy + torch).

Reimplements the math of ADM / DiT `diffusion/` (gaussian_diffusion.py, respace.py,
diffusion_utils.py) the way those files compute it -- numpy float64 tables, the same order of
operations, torch for the loss so that autograd (with ADM's detach of the eps half) gives the
reference gradient -- and writes small binary fixtures:

  tests/fixtures/diffusion_schedule.bin   schedule tables, respaced timesteps and betas
  tests/fixtures/diffusion_loss.bin       q_sample, posterior, p_mean_variance, VB, loss, grad
  tests/fixtures/diffusion_sample.bin     DDIM / DDPM runs of a toy network, with guidance

Container format (little-endian): b"MDFX", u32 count, then per array: u16 name length, name,
u8 dtype (0 f64, 1 f32, 2 i32), u8 ndim, u32 dims[ndim], raw data (C order).

Deliberate points where this (and the C code) choose something ADM leaves open:
  * one-step respacing uses timestep T-1 (ADM's space_timesteps gives {0}, which cannot sample);
    a one-step process has no posterior_variance[1]: its clipped log variance is log(beta_0).
  * x_t is float32(sqrt(abar) x0 + sqrt(1-abar) noise evaluated in float64); ADM evaluates it in
    float32 with float32-cast coefficients (1-2 ulp apart; loss32 below checks that path).
"""
import math
import os
import struct
import sys

import numpy as np
import torch as th

th.set_default_dtype(th.float64)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures")


# ------------------------------------------------------------------------------------------------
# fixture container

def write_fixture(path, arrays):
    out = bytearray(b"MDFX")
    out += struct.pack("<I", len(arrays))
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        code = {np.dtype(np.float64): 0, np.dtype(np.float32): 1, np.dtype(np.int32): 2}[a.dtype]
        nb = name.encode()
        out += struct.pack("<H", len(nb)) + nb + struct.pack("<BB", code, a.ndim)
        out += struct.pack("<%dI" % a.ndim, *a.shape) if a.ndim else b""
        out += a.astype(a.dtype.newbyteorder("<")).tobytes()
    with open(path, "wb") as f:
        f.write(out)
    print("wrote %s (%d bytes, %d arrays)" % (os.path.relpath(path, ROOT), len(out), len(arrays)))


# ------------------------------------------------------------------------------------------------
# schedules and tables (ADM gaussian_diffusion.py)

def named_betas(name, T):
    if name == "linear":
        scale = 1000 / T
        return np.linspace(scale * 0.0001, scale * 0.02, T, dtype=np.float64)
    if name == "cosine":
        ab = lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2
        betas = []
        for i in range(T):
            t1, t2 = i / T, (i + 1) / T
            betas.append(min(1 - ab(t2) / ab(t1), 0.999))
        return np.array(betas)
    raise ValueError(name)


TABLES = ["betas", "log_betas", "alphas_cumprod", "alphas_cumprod_prev", "alphas_cumprod_next",
          "sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod", "log_one_minus_alphas_cumprod",
          "sqrt_recip_alphas_cumprod", "sqrt_recipm1_alphas_cumprod", "posterior_variance",
          "posterior_log_variance_clipped", "posterior_mean_coef1", "posterior_mean_coef2"]


class Diffusion:
    def __init__(self, betas, timestep_map=None, original_T=None):
        betas = np.array(betas, dtype=np.float64)
        assert (betas > 0).all() and (betas <= 1).all()
        self.betas = betas
        self.T = int(betas.shape[0])
        self.timestep_map = list(range(self.T)) if timestep_map is None else list(timestep_map)
        self.original_T = self.T if original_T is None else original_T
        self.vb_scale = self.original_T / 1000.0
        alphas = 1.0 - betas
        self.log_betas = np.log(betas)
        self.alphas_cumprod = np.cumprod(alphas, axis=0)
        self.alphas_cumprod_prev = np.append(1.0, self.alphas_cumprod[:-1])
        self.alphas_cumprod_next = np.append(self.alphas_cumprod[1:], 0.0)
        self.sqrt_alphas_cumprod = np.sqrt(self.alphas_cumprod)
        self.sqrt_one_minus_alphas_cumprod = np.sqrt(1.0 - self.alphas_cumprod)
        self.log_one_minus_alphas_cumprod = np.log(1.0 - self.alphas_cumprod)
        self.sqrt_recip_alphas_cumprod = np.sqrt(1.0 / self.alphas_cumprod)
        self.sqrt_recipm1_alphas_cumprod = np.sqrt(1.0 / self.alphas_cumprod - 1)
        self.posterior_variance = betas * (1.0 - self.alphas_cumprod_prev) / (1.0 - self.alphas_cumprod)
        if self.T > 1:
            self.posterior_log_variance_clipped = np.log(
                np.append(self.posterior_variance[1], self.posterior_variance[1:]))
        else:  # our choice for a one-step process (ADM: empty)
            self.posterior_log_variance_clipped = np.log(betas[:1])
        self.posterior_mean_coef1 = betas * np.sqrt(self.alphas_cumprod_prev) / (1.0 - self.alphas_cumprod)
        self.posterior_mean_coef2 = (1.0 - self.alphas_cumprod_prev) * np.sqrt(alphas) / (1.0 - self.alphas_cumprod)


def space_timesteps(T, n):
    """ADM respace.space_timesteps(T, [n]) (one section), sorted; n == 1 -> [T-1] (see top)."""
    if n == 1:
        return [T - 1]
    frac_stride = (T - 1) / (n - 1)
    cur, steps = 0.0, []
    for _ in range(n):
        steps.append(round(cur))
        cur += frac_stride
    return sorted(set(steps))


def respaced(base, n):
    use = set(space_timesteps(base.T, n))
    last, betas, tmap = 1.0, [], []
    for i, ac in enumerate(base.alphas_cumprod):
        if i in use:
            betas.append(1 - ac / last)
            last = ac
            tmap.append(base.timestep_map[i])
    return Diffusion(np.array(betas), tmap, base.original_T)


# ------------------------------------------------------------------------------------------------
# loss (ADM training_losses with MSE + learned range), torch, dtype float64 or float32

def ext(arr, t, dtype):
    return th.from_numpy(np.asarray(arr))[t].to(dtype).view(-1, 1, 1, 1)


def normal_kl(mean1, logvar1, mean2, logvar2):
    return 0.5 * (-1.0 + logvar2 - logvar1 + th.exp(logvar1 - logvar2)
                  + ((mean1 - mean2) ** 2) * th.exp(-logvar2))


def approx_standard_normal_cdf(x):
    return 0.5 * (1.0 + th.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * th.pow(x, 3))))


def discretized_gaussian_log_likelihood(x, means, log_scales):
    centered_x = x - means
    inv_stdv = th.exp(-log_scales)
    plus_in = inv_stdv * (centered_x + 1.0 / 255.0)
    cdf_plus = approx_standard_normal_cdf(plus_in)
    min_in = inv_stdv * (centered_x - 1.0 / 255.0)
    cdf_min = approx_standard_normal_cdf(min_in)
    log_cdf_plus = th.log(cdf_plus.clamp(min=1e-12))
    log_one_minus_cdf_min = th.log((1.0 - cdf_min).clamp(min=1e-12))
    cdf_delta = cdf_plus - cdf_min
    return th.where(x < -0.999, log_cdf_plus,
                    th.where(x > 0.999, log_one_minus_cdf_min, th.log(cdf_delta.clamp(min=1e-12))))


def q_posterior(d, x0, xt, t, dtype):
    mean = ext(d.posterior_mean_coef1, t, dtype) * x0 + ext(d.posterior_mean_coef2, t, dtype) * xt
    return mean, ext(d.posterior_variance, t, dtype), ext(d.posterior_log_variance_clipped, t, dtype)


def p_mean_variance(d, model_out, xt, t, clip, dtype, learned=True):
    C = xt.shape[1]
    if learned:
        eps, v = th.split(model_out, C, dim=1)
        min_log = ext(d.posterior_log_variance_clipped, t, dtype)
        max_log = ext(np.log(d.betas), t, dtype)
        frac = (v + 1) / 2
        log_var = frac * max_log + (1 - frac) * min_log
    else:
        eps = model_out
        log_var = ext(d.posterior_log_variance_clipped, t, dtype).expand_as(xt)
    px0 = ext(d.sqrt_recip_alphas_cumprod, t, dtype) * xt - ext(d.sqrt_recipm1_alphas_cumprod, t, dtype) * eps
    if clip:
        px0 = px0.clamp(-1, 1)
    mean, _, _ = q_posterior(d, px0, xt, t, dtype)
    return mean, log_var, px0


def vb_terms_bpd(d, frozen_out, x0, xt, t, dtype):
    true_mean, _, true_lv = q_posterior(d, x0, xt, t, dtype)
    mean, log_var, _ = p_mean_variance(d, frozen_out, xt, t, False, dtype)
    kl = normal_kl(true_mean, true_lv, mean, log_var)
    kl = kl.mean(dim=(1, 2, 3)) / np.log(2.0)
    nll = -discretized_gaussian_log_likelihood(x0, mean, 0.5 * log_var)
    nll = nll.mean(dim=(1, 2, 3)) / np.log(2.0)
    return th.where(t == 0, nll, kl)


def training_losses(d, model_out, x0, noise, t, xt, dtype, learned=True):
    """ADM training_losses (loss MSE, vb scaled by T/1000 as RESCALED_MSE); xt given."""
    C = x0.shape[1]
    terms = {}
    if learned:
        eps, v = th.split(model_out, C, dim=1)
        frozen = th.cat([eps.detach(), v], dim=1)
        terms["vb"] = vb_terms_bpd(d, frozen, x0, xt, t, dtype) * (d.T / 1000.0)
    else:
        eps = model_out
        terms["vb"] = th.zeros(x0.shape[0], dtype=dtype)
    terms["mse"] = ((noise - eps) ** 2).mean(dim=(1, 2, 3))
    terms["loss"] = terms["mse"] + terms["vb"]
    return terms


def loss_case(prefix, d, rs, n, C, S, ts, learned, arrays, with32=False, with_p=False):
    x0 = (rs.randint(0, 256, size=(n, C, S, S)) / 127.5 - 1).astype(np.float32)
    x0[:, 0, 0, :2] = (-1.0, 1.0)  # ADM's edge bins of the discretised likelihood
    noise = rs.randn(n, C, S, S).astype(np.float32)
    eps = (noise + 0.1 * rs.randn(n, C, S, S)).astype(np.float32)
    v = rs.uniform(-0.9, 0.9, size=(n, C, S, S)).astype(np.float32)
    out = np.concatenate([eps, v], axis=1) if learned else eps
    t = np.array(ts, dtype=np.int32)
    tt = th.from_numpy(t.astype(np.int64))
    sa = d.sqrt_alphas_cumprod[t].reshape(-1, 1, 1, 1)
    s1m = d.sqrt_one_minus_alphas_cumprod[t].reshape(-1, 1, 1, 1)
    xt = (sa * x0.astype(np.float64) + s1m * noise.astype(np.float64)).astype(np.float32)

    f64 = lambda a: th.from_numpy(a.astype(np.float64))
    mo = f64(out).requires_grad_(True)
    terms = training_losses(d, mo, f64(x0), f64(noise), tt, f64(xt), th.float64, learned)
    terms["loss"].mean().backward()
    arrays.update({
        prefix + "x0": x0, prefix + "noise": noise, prefix + "model_out": out.astype(np.float32),
        prefix + "t": t, prefix + "xt": xt,
        prefix + "mse": terms["mse"].detach().numpy(), prefix + "vb": terms["vb"].detach().numpy(),
        prefix + "loss": terms["loss"].detach().numpy(), prefix + "grad": mo.grad.numpy(),
    })
    if with_p:
        with th.no_grad():
            pm, _, _ = q_posterior(d, f64(x0), f64(xt), tt, th.float64)
            arrays[prefix + "post_mean"] = pm.numpy().astype(np.float32)
            for clip in (0, 1):
                m, lv, px0 = p_mean_variance(d, f64(out), f64(xt), tt, bool(clip), th.float64, learned)
                arrays[prefix + "p_mean%d" % clip] = m.numpy().astype(np.float32)
                arrays[prefix + "p_logvar%d" % clip] = lv.numpy().astype(np.float32)
                arrays[prefix + "p_x0%d" % clip] = px0.numpy().astype(np.float32)
    if with32:  # ADM's own float32 path: q_sample and everything else in float32
        f32 = lambda a: th.from_numpy(a.astype(np.float32))
        with th.no_grad():
            xt32 = ext(d.sqrt_alphas_cumprod, tt, th.float32) * f32(x0) + \
                ext(d.sqrt_one_minus_alphas_cumprod, tt, th.float32) * f32(noise)
            t32 = training_losses(d, f32(out), f32(x0), f32(noise), tt, xt32, th.float32, learned)
        arrays[prefix + "xt32"] = xt32.numpy()
        arrays[prefix + "loss32"] = t32["loss"].numpy()


# ------------------------------------------------------------------------------------------------
# toy network and samplers (mirrors tests/test_diffusion.c: float32 state, float64 arithmetic)

def toy_net(p, x, t, y, C, cout):
    """z[o,p] = sum_c A[o,c] x[c,p] + P[o,p] + E[y,o] + B[o] cos(F[o] t); eps = 2 tanh z, v = tanh z."""
    n = x.shape[0]
    xs = x.reshape(n, C, -1).astype(np.float64)
    A, P, E, B, F = [p[k].astype(np.float64) for k in ("A", "P", "E", "B", "F")]
    out = np.zeros((n, cout, xs.shape[2]))
    for b in range(n):
        for o in range(cout):
            z = np.zeros(xs.shape[2])
            for c in range(C):
                z = z + A[o, c] * xs[b, c]
            z = z + P[o] + E[y[b], o] + B[o] * math.cos(F[o] * float(t[b]))
            out[b, o] = (2.0 if o < C else 1.0) * np.tanh(z)
    return out.astype(np.float32).reshape(n, cout, *x.shape[2:])


def run_sampler(d, params, xT, y, C, cout, kind, w, eta, clip, K, noise=None):
    """Returns final x, x0 per step [N, n, C, S, S], t per step, model batch sizes."""
    n = xT.shape[0]
    learned = cout == 2 * C
    x = xT.astype(np.float32).copy()
    N = d.T
    x0s, tvals, batches = [], [], []
    for step in range(N):
        i = N - 1 - step
        tv = np.float32(d.timestep_map[i])
        if w != 1.0:
            out = toy_net(params, np.concatenate([x, x]), [tv] * (2 * n), list(y) + [K] * n, C, cout)
            ec, eu = out[:n, :C].astype(np.float64), out[n:, :C].astype(np.float64)
            eps = eu + np.float64(np.float32(w)) * (ec - eu)
            batches.append(2 * n)
        else:
            out = toy_net(params, x, [tv] * n, list(y), C, cout)
            eps = out[:, :C].astype(np.float64)
            batches.append(n)
        tvals.append(tv)
        xv = x.astype(np.float64)
        px0 = d.sqrt_recip_alphas_cumprod[i] * xv - d.sqrt_recipm1_alphas_cumprod[i] * eps
        if clip:
            px0 = np.clip(px0, -1.0, 1.0)
        z = noise[step].astype(np.float64) if (noise is not None and i > 0) else None
        if kind == "ddim":
            ab, abp = d.alphas_cumprod[i], d.alphas_cumprod_prev[i]
            e = np.float64(np.float32(eta))
            sigma = e * math.sqrt((1 - abp) / (1 - ab)) * math.sqrt(1 - ab / abp)
            e2 = (d.sqrt_recip_alphas_cumprod[i] * xv - px0) / d.sqrt_recipm1_alphas_cumprod[i]
            xn = px0 * math.sqrt(abp) + math.sqrt(1 - abp - sigma * sigma) * e2
            if z is not None and eta > 0:
                xn = xn + sigma * z
        else:
            xn = d.posterior_mean_coef1[i] * px0 + d.posterior_mean_coef2[i] * xv
            if z is not None:
                if learned:
                    v = out[:n, C:].astype(np.float64)
                    f = (v + 1.0) / 2.0
                    lv = f * d.log_betas[i] + (1.0 - f) * d.posterior_log_variance_clipped[i]
                    sd = np.exp(0.5 * lv)
                else:
                    sd = math.exp(0.5 * d.posterior_log_variance_clipped[i])
                xn = xn + sd * z
        x0s.append(px0.astype(np.float32))
        x = xn.astype(np.float32)
    return x, np.stack(x0s), np.array(tvals, dtype=np.float32), np.array(batches, dtype=np.int32)


def toy_params(rs, C, cout, K, S):
    return {
        "A": (rs.randn(cout, C) * 0.6).astype(np.float32),
        "P": (rs.randn(cout, S * S) * 0.3).astype(np.float32),
        "E": (rs.randn(K + 1, cout) * 0.5).astype(np.float32),
        "B": (rs.randn(cout) * 0.5).astype(np.float32),
        "F": rs.uniform(0.001, 0.01, size=cout).astype(np.float32),
    }


def main():
    os.makedirs(FIX, exist_ok=True)
    rs = np.random.RandomState(1234)

    # ---- schedules and respacing
    arr = {}
    idx = np.unique(np.concatenate([np.arange(0, 12), np.arange(12, 990, 23), np.arange(990, 1000)])).astype(np.int32)
    arr["idx"] = idx
    for name in ("linear", "cosine"):
        d = Diffusion(named_betas(name, 1000))
        arr[name + "_betas_full"] = d.betas
        for tab in TABLES:
            arr["%s_%s" % (name, tab)] = getattr(d, tab)[idx]
    for name, T in (("linear", 250), ("cosine", 37), ("linear", 400)):
        arr["%s%d_betas" % (name, T)] = named_betas(name, T)
    base = Diffusion(named_betas("linear", 1000))
    steps = [1, 2, 10, 21, 25, 27, 50, 100, 250, 1000]
    arr["resp_counts"] = np.array(steps, dtype=np.int32)
    for n in steps:
        sp = respaced(base, n)
        assert len(sp.timestep_map) == n
        arr["resp%d_map" % n] = np.array(sp.timestep_map, dtype=np.int32)
        arr["resp%d_betas" % n] = sp.betas
        if n <= 100:
            arr["resp%d_plvc" % n] = sp.posterior_log_variance_clipped
    cbase = Diffusion(named_betas("cosine", 1000))
    sp = respaced(cbase, 50)
    arr["cresp50_map"] = np.array(sp.timestep_map, dtype=np.int32)
    arr["cresp50_betas"] = sp.betas
    write_fixture(os.path.join(FIX, "diffusion_schedule.bin"), arr)

    # ---- loss
    arr = {}
    n, C, S = 8, 3, 4
    loss_case("lin_", Diffusion(named_betas("linear", 1000)), rs, n, C, S,
              [0, 0, 1, 2, 10, 500, 998, 999], True, arr, with32=True, with_p=True)
    loss_case("cos_", Diffusion(named_betas("cosine", 1000)), rs, n, C, S,
              [0, 999, 1, 3, 100, 500, 900, 0], True, arr)
    loss_case("l500_", Diffusion(named_betas("linear", 500)), rs, n, C, S,
              [0, 0, 1, 2, 10, 250, 498, 499], True, arr)
    loss_case("fix_", Diffusion(named_betas("linear", 1000)), rs, 4, C, S, [0, 7, 400, 999], False, arr, with_p=True)
    write_fixture(os.path.join(FIX, "diffusion_loss.bin"), arr)

    # ---- sampler runs with the toy network
    arr = {}
    K, C, S, n = 5, 2, 4, 3
    lin = Diffusion(named_betas("linear", 1000))
    cos = Diffusion(named_betas("cosine", 1000))
    runs = [  # name, base, steps, kind, w, eta, clip, learned, noisy
        ("ddim", lin, 25, "ddim", 4.0, 0.0, 1, True, False),
        ("ddpm", lin, 25, "ddpm", 4.0, 0.0, 1, True, True),
        ("ddpmfix", cos, 10, "ddpm", 1.0, 0.0, 0, False, True),
        ("ddimeta", cos, 10, "ddim", 1.5, 0.5, 0, True, True),
        ("ddim1", lin, 1, "ddim", 4.0, 0.0, 1, True, False),
    ]
    for name, base_d, steps_n, kind, w, eta, clip, learned, noisy in runs:
        cout = 2 * C if learned else C
        p = toy_params(rs, C, cout, K, S)
        xT = rs.randn(n, C, S, S).astype(np.float32)
        y = np.array([1, 4, K], dtype=np.int32)
        sp = respaced(base_d, steps_n)
        noise = rs.randn(steps_n, n, C, S, S).astype(np.float32) if noisy else None
        x, x0s, tv, nb = run_sampler(sp, p, xT, y, C, cout, kind, w, eta, clip, K, noise)
        pre = name + "_"
        for k, a in p.items():
            arr[pre + k] = a
        arr[pre + "xT"] = xT
        arr[pre + "y"] = y
        if noisy:
            arr[pre + "noise"] = noise
        arr[pre + "x"] = x
        arr[pre + "x0s"] = x0s
        arr[pre + "t"] = tv
        arr[pre + "batch"] = nb
    write_fixture(os.path.join(FIX, "diffusion_sample.bin"), arr)


if __name__ == "__main__":
    sys.exit(main())
