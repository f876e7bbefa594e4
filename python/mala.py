"""mala: the public C API of mala-dit (include/mala.h) from Python, through ctypes; numpy arrays in and out.

    import mala
    ctx = mala.Context()                      # device=None|"cpu"|"cuda", precision=None|"fp32"|"tf32"|"bf16"|"int8", threads=0
    m = ctx.load("assets/mala-dit-fmnist.safetensors")
    img = m.generate(cls="Sneaker", count=16, sampler="ddim", steps=50, seed=0)  # float32 [16, C, S, S] in [-1, 1]
    u8 = m.generate(cls="Sneaker", count=16, sampler="ddim", steps=50, dtype="uint8")  # uint8 [16, S, S, C]
    ctx.write_png_grid("sneakers.png", img)

The library: $MALA_LIB, else libmala.so.1 in ../build/ beside this file (a source tree), else the
system's (`make install`). Only numpy is needed beyond the standard library. Errors raise
mala.Error with the library's one-line message. See docs/library.md.
"""
import ctypes
import ctypes.util
import os

import numpy as np

API_VERSION = 1


class Error(RuntimeError):
    pass


def _load_library():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("MALA_LIB"), os.path.join(here, "..", "build", "libmala.so.%d" % API_VERSION),
                 ctypes.util.find_library("mala")):
        if path and (os.path.exists(path) or not os.path.dirname(path)):
            return ctypes.CDLL(path)
    raise Error("libmala not found: build it (make lib), install it (make install), or set MALA_LIB")


_lib = _load_library()
_c = ctypes
_P = _c.c_void_p
STEP_FN = _c.CFUNCTYPE(_c.c_int, _P, _c.c_int, _c.c_int, _c.c_int, _c.c_int, _c.POINTER(_c.c_float))


class _ContextOptions(_c.Structure):
    _fields_ = [("device", _c.c_char_p), ("precision", _c.c_char_p), ("threads", _c.c_int)]


class _ModelInfo(_c.Structure):
    _fields_ = [("backbone", _c.c_char_p), ("num_classes", _c.c_int), ("channels", _c.c_int),
                ("image_size", _c.c_int), ("out_channels", _c.c_int), ("out_size", _c.c_int), ("latent", _c.c_int)]


class _GenParams(_c.Structure):
    _fields_ = [("sampler", _c.c_char_p), ("steps", _c.c_int), ("cfg_scale", _c.c_float), ("eta", _c.c_float),
                ("clip", _c.c_int), ("class_id", _c.c_int), ("labels", _c.POINTER(_c.c_int32)), ("blend", _c.c_int),
                ("blend_a", _c.c_int), ("blend_b", _c.c_int), ("blend_w", _c.c_float), ("seed", _c.c_uint64),
                ("count", _c.c_int), ("batch", _c.c_int), ("on_step", STEP_FN), ("user", _P)]


def _sig(name, res, *args):
    f = getattr(_lib, name)
    f.restype, f.argtypes = res, list(args)
    return f


_FP = _c.POINTER(_c.c_float)
_api_version = _sig("mala_api_version", _c.c_int)
_ctx_new = _sig("mala_context_new", _P, _c.POINTER(_ContextOptions), _c.c_char_p, _c.c_size_t)
_ctx_free = _sig("mala_context_free", None, _P)
_ctx_error = _sig("mala_context_error", _c.c_char_p, _P)
_ctx_device = _sig("mala_context_device", _c.c_char_p, _P)
_ctx_precision = _sig("mala_context_precision", _c.c_char_p, _P)
_model_load = _sig("mala_model_load", _c.c_int, _P, _c.c_char_p, _c.c_char_p, _c.POINTER(_P))
_model_free = _sig("mala_model_free", None, _P)
_model_error = _sig("mala_model_error", _c.c_char_p, _P)
_model_info = _sig("mala_model_get_info", _c.c_int, _P, _c.POINTER(_ModelInfo))
_class_name = _sig("mala_model_class_name", _c.c_char_p, _P, _c.c_int)
_class_find = _sig("mala_model_class_find", _c.c_int, _P, _c.c_char_p)
_params_default = _sig("mala_gen_params_default", _GenParams)
_generate = _sig("mala_generate", _c.c_int, _P, _c.POINTER(_GenParams), _FP)
_generate_u8 = _sig("mala_generate_u8", _c.c_int, _P, _c.POINTER(_GenParams), _c.POINTER(_c.c_uint8))
_write_grid = _sig("mala_write_png_grid", _c.c_int, _P, _c.c_char_p, _FP, _c.c_int, _c.c_int, _c.c_int, _c.c_int)
_vae_load = _sig("mala_vae_load", _c.c_int, _P, _c.c_char_p, _c.c_int, _c.c_int, _c.POINTER(_P))
_vae_free = _sig("mala_vae_free", None, _P)
_vae_error = _sig("mala_vae_error", _c.c_char_p, _P)
_vae_dims = _sig("mala_vae_dims", _c.c_int, _P, _c.POINTER(_c.c_int), _c.POINTER(_c.c_int), _c.POINTER(_c.c_int))
_vae_encode = _sig("mala_vae_encode", _c.c_int, _P, _FP, _c.c_int, _c.c_int, _c.c_int, _FP, _FP)
_vae_decode = _sig("mala_vae_decode", _c.c_int, _P, _FP, _c.c_int, _c.c_int, _c.c_int, _FP)
_fid_images = _sig("mala_fid_stats_images", _c.c_int, _P, _c.c_char_p, _FP, _c.c_int, _c.c_int, _c.c_int, _c.c_int,
                   _c.POINTER(_P))
_fid_load = _sig("mala_fid_stats_load", _c.c_int, _P, _c.c_char_p, _c.POINTER(_P))
_fid_save = _sig("mala_fid_stats_save", _c.c_int, _P, _P, _c.c_char_p)
_fid_free = _sig("mala_fid_stats_free", None, _P)
_fid = _sig("mala_fid", _c.c_int, _P, _P, _P, _c.POINTER(_c.c_double))

if _api_version() != API_VERSION:
    raise Error("libmala has API version %d; this mala.py binds version %d" % (_api_version(), API_VERSION))


def _enc(s):
    return None if s is None else os.fsencode(s) if not isinstance(s, bytes) else s


def _floats(a, ndim):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.ndim != ndim:
        raise Error("expected a %d-dimensional float32 array, got shape %s" % (ndim, a.shape))
    return a


def _ptr(a, t=_c.c_float):
    return a.ctypes.data_as(_c.POINTER(t))


class Context:
    """The device, precision and thread count; every other handle is made from one."""

    def __init__(self, device=None, precision=None, threads=0):
        opt = _ContextOptions(_enc(device), _enc(precision), threads)
        err = _c.create_string_buffer(256)
        self._h = _ctx_new(_c.byref(opt), err, len(err))
        if not self._h:
            raise Error(err.value.decode())

    def _check(self, rc):
        if rc:
            raise Error(_ctx_error(self._h).decode())

    @property
    def device(self):
        return _ctx_device(self._h).decode()

    @property
    def precision(self):
        return _ctx_precision(self._h).decode()

    def load(self, path, vae=None):
        return Model(self, path, vae)

    def vae(self, path, max_batch=8, max_size=256):
        return Vae(self, path, max_batch, max_size)

    def write_png_grid(self, path, images, nrow=8):
        x = _floats(images, 4)
        if x.shape[2] != x.shape[3]:
            raise Error("write_png_grid: square images [n, c, s, s] expected, got %s" % (x.shape,))
        self._check(_write_grid(self._h, _enc(path), _ptr(x), x.shape[0], x.shape[1], x.shape[2], nrow))

    def fid_stats(self, inception, images):
        """FID statistics of images [n, c, h, w] in [-1, 1] (pytorch-fid's Inception weights file)."""
        x = _floats(images, 4)
        h = _P()
        self._check(_fid_images(self._h, _enc(inception), _ptr(x), *x.shape, _c.byref(h)))
        return FidStats(self, h)

    def load_fid_stats(self, path):
        h = _P()
        self._check(_fid_load(self._h, _enc(path), _c.byref(h)))
        return FidStats(self, h)

    def fid(self, a, b):
        out = _c.c_double()
        self._check(_fid(self._h, a._h, b._h, _c.byref(out)))
        return out.value

    def __del__(self):
        if getattr(self, "_h", None):
            _ctx_free(self._h)
            self._h = None


class Model:
    def __init__(self, ctx, path, vae=None):
        self.ctx = ctx  # kept alive while the model is
        h = _P()
        ctx._check(_model_load(ctx._h, _enc(path), _enc(vae), _c.byref(h)))
        self._h = h
        info = _ModelInfo()
        _model_info(h, _c.byref(info))
        self.backbone = info.backbone.decode()
        self.num_classes, self.latent = info.num_classes, bool(info.latent)
        self.channels, self.image_size = info.channels, info.image_size
        self.out_channels, self.out_size = info.out_channels, info.out_size
        self.classes = [_class_name(h, k).decode() for k in range(self.num_classes)]

    def class_index(self, cls):
        k = _class_find(self._h, _enc(str(cls)))
        if k < 0:
            raise Error("unknown class %r; the model knows: %s" % (cls, ", ".join(self.classes)))
        return k

    def generate(self, cls=None, labels=None, count=None, sampler="ddpm", steps=250, cfg_scale=4.0, eta=0.0,
                 clip=True, seed=0, batch=16, blend=None, on_step=None, dtype="float32"):
        """Images as float32 [count, C, S, S] in [-1, 1], or uint8 [count, S, S, C] with dtype="uint8".
        cls: a class name or number for every image; labels: one per image; neither: the classes in equal
        blocks. blend=(a, b, w) mixes two classes' embeddings. on_step(first, n, step, steps, preview) sees
        the predicted x0 as a numpy array after every step and cancels by returning True."""
        p = _params_default()
        p.sampler, p.steps, p.cfg_scale, p.eta, p.clip = _enc(sampler), steps, cfg_scale, eta, int(bool(clip))
        p.seed, p.batch = seed, batch
        lab = None
        if labels is not None:
            lab = np.ascontiguousarray([self.class_index(c) for c in labels], dtype=np.int32)
            p.labels, count = _ptr(lab, _c.c_int32), len(lab) if count is None else count
            if count != len(lab):
                raise Error("count %d disagrees with the %d labels given" % (count, len(lab)))
        p.count = 16 if count is None else count
        p.class_id = self.class_index(cls) if cls is not None else -1
        if blend is not None:
            p.blend, p.blend_a, p.blend_b, p.blend_w = 1, self.class_index(blend[0]), self.class_index(blend[1]), blend[2]
        shape = (self.channels, self.image_size, self.image_size)
        if on_step is not None:
            def fn(user, first, n, i, steps, x0):
                return int(bool(on_step(first, n, i, steps, np.ctypeslib.as_array(x0, (n,) + shape).copy())))
            p.on_step = STEP_FN(fn)
        S, C = self.out_size, self.out_channels
        if dtype == "uint8":
            out = np.empty((p.count, S, S, C), np.uint8)
            rc = _generate_u8(self._h, _c.byref(p), _ptr(out, _c.c_uint8))
        else:
            out = np.empty((p.count, C, S, S), np.float32)
            rc = _generate(self._h, _c.byref(p), _ptr(out))
        if rc:
            raise Error(_model_error(self._h).decode())
        return out

    def __del__(self):
        if getattr(self, "_h", None):
            _model_free(self._h)
            self._h = None


class Vae:
    def __init__(self, ctx, path, max_batch, max_size):
        self.ctx = ctx
        h = _P()
        ctx._check(_vae_load(ctx._h, _enc(path), max_batch, max_size, _c.byref(h)))
        self._h = h
        c, lat, f = _c.c_int(), _c.c_int(), _c.c_int()
        _vae_dims(h, _c.byref(c), _c.byref(lat), _c.byref(f))
        self.channels, self.latent, self.factor = c.value, lat.value, f.value

    def _check(self, rc):
        if rc:
            raise Error(_vae_error(self._h).decode())

    def encode(self, images):
        """images [n, C, H, W] in [-1, 1] -> the posterior mean [n, latent, H/f, W/f] (unscaled)."""
        x = _floats(images, 4)
        n, _, H, W = x.shape
        mean = np.empty((n, self.latent, H // self.factor, W // self.factor), np.float32)
        self._check(_vae_encode(self._h, _ptr(x), n, H, W, _ptr(mean), None))
        return mean

    def decode(self, z):
        """scaled latents z [n, latent, h, w] -> images [n, C, h f, w f]."""
        z = _floats(z, 4)
        n, _, h, w = z.shape
        out = np.empty((n, self.channels, h * self.factor, w * self.factor), np.float32)
        self._check(_vae_decode(self._h, _ptr(z), n, h, w, _ptr(out)))
        return out

    def __del__(self):
        if getattr(self, "_h", None):
            _vae_free(self._h)
            self._h = None


class FidStats:
    def __init__(self, ctx, h):
        self.ctx, self._h = ctx, h

    def save(self, path):
        self.ctx._check(_fid_save(self.ctx._h, self._h, _enc(path)))

    def __del__(self):
        if getattr(self, "_h", None):
            _fid_free(self._h)
            self._h = None
