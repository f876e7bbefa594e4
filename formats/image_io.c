// defines: image_limits_default, image_probe, image_decode, image_load, image_check, image_write_png,
//          image_resize, image_center_crop_arr, image_u8_to_float, image_grid_u8, image_save_grid
// The single translation unit holding the stb_image / stb_image_write implementations; stb_image
// is compiled with PNG and BMP only (STBI_ONLY_*). JPEG goes to libjpeg-turbo: Debian's stb_image
// (2022-09) writes past its Huffman tables on a DHT segment of more than 256 codes (the fuzz
// campaign's first finding), and libjpeg is what PIL decodes with, so the pixels are PIL's. Binary
// PGM / PPM are read here. Every other format is refused before any decoder sees it.
#include "formats/image_io.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <string.h>
#include <sys/stat.h>

#include <jerror.h>
#include <jpeglib.h>

#include "formats/atomic_file.h"  // defines: atomic_write_file
#include "formats/png_text.h"  // defines: png_text_add

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#include <stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#pragma GCC diagnostic pop

// ---------------------------------------------------------------------------------------------
// files: format, header and limits first, then the decoder

ImageLimits image_limits_default(void) {
    return (ImageLimits){IMAGE_MAX_SIDE, IMAGE_MAX_PIXELS, IMAGE_MAX_FILE_BYTES};
}

typedef enum { FMT_PNG, FMT_JPEG, FMT_BMP, FMT_PNM } Format;
static const char *const FORMAT_NAME[] = {"PNG", "JPEG", "BMP", "PGM/PPM"};

#define HEAD_LEN 4096   // a PGM / PPM header (comments included) must fit in the first 4 KiB
#define TAIL_LEN 1024   // where the PNG IEND chunk / the JPEG end-of-image marker is looked for

// The format from the first bytes, or -1 with a message naming what the file is when known.
static int sniff(const unsigned char *b, size_t n, const char *name, MalaErr *err) {
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) return FMT_PNG;
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return FMT_JPEG;
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return FMT_BMP;
    if (n >= 3 && b[0] == 'P' && (b[1] == '5' || b[1] == '6') && strchr(" \t\r\n#", b[2]) && b[2]) return FMT_PNM;
    const char *what = NULL;
    if (n >= 4 && memcmp(b, "GIF8", 4) == 0) what = "GIF";
    else if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0) what = "WebP";
    else if (n >= 4 && (memcmp(b, "II*\0", 4) == 0 || memcmp(b, "MM\0*", 4) == 0)) what = "TIFF";
    else if (n >= 4 && memcmp(b, "8BPS", 4) == 0) what = "PSD";
    else if (n >= 2 && memcmp(b, "#?", 2) == 0) what = "Radiance HDR";
    else if (n >= 2 && b[0] == 'P' && strchr("12347", b[1]) && b[1]) what = "ASCII or bitmap PNM / PAM";
    if (what) return mala_errf(err, "%s: %s images are not supported (PNG, JPEG, BMP, binary PGM/PPM are)", name, what);
    return mala_errf(err, "%s: not an image in a supported format (PNG, JPEG, BMP, binary PGM/PPM)", name);
}

// A binary PGM (P5) / PPM (P6) header: magic, width, height, maxval separated by whitespace and
// '#' comments, then exactly one whitespace byte before the samples (big-endian when maxval > 255).
typedef struct { int w, h, c, maxval, bps; size_t data_off; } Pnm;

static int pnm_number(const unsigned char *b, size_t n, size_t *pos, const char *what, long max, long *out,
                      const char *name, MalaErr *err) {
    size_t p = *pos;
    for (;;) {   // whitespace and comments
        while (p < n && strchr(" \t\r\n\v\f", b[p]) && b[p]) p++;
        if (p < n && b[p] == '#') { while (p < n && b[p] != '\n' && b[p] != '\r') p++; continue; }
        break;
    }
    if (p >= n) return mala_errf(err, "%s: PGM/PPM header incomplete (or longer than %d bytes)", name, HEAD_LEN);
    if (b[p] < '0' || b[p] > '9') return mala_errf(err, "%s: bad PGM/PPM header (the %s is not a number)", name, what);
    long v = 0;
    while (p < n && b[p] >= '0' && b[p] <= '9') {
        v = v * 10 + (b[p++] - '0');
        if (v > max) return mala_errf(err, "%s: PGM/PPM %s is larger than %ld", name, what, max);
    }
    *pos = p;
    *out = v;
    return 0;
}

static int pnm_header(const unsigned char *b, size_t n, const char *name, Pnm *h, MalaErr *err) {
    if (n > HEAD_LEN) n = HEAD_LEN;
    size_t p = 2;
    long w, hh, maxval;
    if (pnm_number(b, n, &p, "width", IMAGE_MAX_SIDE, &w, name, err) ||
        pnm_number(b, n, &p, "height", IMAGE_MAX_SIDE, &hh, name, err) ||
        pnm_number(b, n, &p, "maxval", 65535, &maxval, name, err))
        return -1;
    if (p >= n || !strchr(" \t\r\n\v\f", b[p]) || !b[p])
        return mala_errf(err, "%s: bad PGM/PPM header (no whitespace after the maxval)", name);
    if (maxval < 1) return mala_errf(err, "%s: PGM/PPM maxval is 0", name);
    *h = (Pnm){(int)w, (int)hh, b[1] == '6' ? 3 : 1, (int)maxval, maxval > 255 ? 2 : 1, p + 1};
    return 0;
}

typedef struct { Format fmt; int w, h; Pnm pnm; } Probe;

static int check_size(const Probe *p, const char *name, const ImageLimits *lim, MalaErr *err) {
    if (p->w < 1 || p->h < 1) return mala_errf(err, "%s: %s image of %dx%d pixels", name, FORMAT_NAME[p->fmt], p->w, p->h);
    if (p->w > lim->max_side || p->h > lim->max_side)
        return mala_errf(err, "%s: %dx%d pixels: a side longer than %d is refused (corrupt or hostile header?)", name,
                         p->w, p->h, lim->max_side);
    if ((int64_t)p->w * p->h > lim->max_pixels)
        return mala_errf(err, "%s: %dx%d pixels, more than the %lld an image may have (a decompression bomb?)", name,
                         p->w, p->h, (long long)lim->max_pixels);
    return 0;
}

static uint32_t be32(const unsigned char *b) { return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]; }
static uint32_t le32(const unsigned char *b) { return (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0]; }

// The size a PNG's IHDR or a BMP's info header declares (0 x 0 when absent or odd: stb_image
// then judges), clamped to INT_MAX.
static void header_size(Format f, const unsigned char *b, size_t n, int *w, int *h) {
    uint64_t x = 0, y = 0;
    if (f == FMT_PNG && n >= 24 && memcmp(b + 12, "IHDR", 4) == 0) {
        x = be32(b + 16);
        y = be32(b + 20);
    } else if (f == FMT_BMP && n >= 26) {
        uint32_t hsz = le32(b + 14);
        if (hsz == 12) { x = (uint32_t)b[18] | (uint32_t)b[19] << 8; y = (uint32_t)b[20] | (uint32_t)b[21] << 8; }
        else if (hsz >= 40) { x = le32(b + 18); int32_t yy = (int32_t)le32(b + 22); y = yy < 0 ? -(int64_t)yy : yy; }
    }
    *w = x > INT32_MAX ? INT32_MAX : (int)x;
    *h = y > INT32_MAX ? INT32_MAX : (int)y;
}

// Every PNG chunk (length, type, data, CRC) up to IEND lies inside the file: stb_image sizes its
// IDAT buffer from the length fields before reading them (2 GB for a 200-byte file otherwise).
// `at(ctx, off, b8)` reads the 8 bytes (length and type) of the chunk at offset off.
static int png_chunks_fit(int (*at)(void *, uint64_t, unsigned char *), void *ctx, uint64_t n, const char *name,
                          MalaErr *err) {
    uint64_t pos = 8;
    for (;;) {
        unsigned char h[8];
        if (n - pos < 12 || at(ctx, pos, h))
            return mala_errf(err, "%s: truncated PNG (a chunk runs past the end of the file)", name);
        uint64_t len = be32(h);
        if (len > n - pos - 12) {
            char t[5];
            for (int k = 0; k < 4; k++) t[k] = h[4 + k] >= 32 && h[4 + k] < 127 ? (char)h[4 + k] : '?';
            t[4] = 0;
            return mala_errf(err, "%s: corrupt PNG (chunk '%s' of %llu bytes runs past the end of the file)", name, t,
                             (unsigned long long)len);
        }
        pos += 12 + len;
        if (memcmp(h + 4, "IEND", 4) == 0) return 0;
    }
}

static int mem_at(void *ctx, uint64_t off, unsigned char *b8) { memcpy(b8, (const unsigned char *)ctx + off, 8); return 0; }
static int file_at(void *ctx, uint64_t off, unsigned char *b8) {
    return fseeko(ctx, (off_t)off, SEEK_SET) != 0 || fread(b8, 1, 8, ctx) != 8 ? -1 : 0;
}

// Format, end marker and (PGM / PPM) header from the first and last bytes of a file of `size` bytes.
static int probe_ends(const unsigned char *head, size_t hn, const unsigned char *tail, size_t tn, uint64_t size,
                      const char *name, const ImageLimits *lim, Probe *p, MalaErr *err) {
    if (size > (uint64_t)lim->max_file_bytes)
        return mala_errf(err, "%s: %llu bytes, more than the %lld an image file may have", name,
                         (unsigned long long)size, (long long)lim->max_file_bytes);
    int f = sniff(head, hn, name, err);
    if (f < 0) return -1;
    p->fmt = (Format)f;
    if (p->fmt == FMT_PNG) {
        size_t from = tn > 64 ? tn - 64 : 0;
        int ok = 0;
        for (size_t i = from; i + 4 <= tn; i++) if (memcmp(tail + i, "IEND", 4) == 0) { ok = 1; break; }
        if (!ok) return mala_errf(err, "%s: truncated PNG (no IEND chunk at the end)", name);
    } else if (p->fmt == FMT_JPEG) {
        int ok = 0;
        for (size_t i = 0; i + 2 <= tn; i++) if (tail[i] == 0xFF && tail[i + 1] == 0xD9) { ok = 1; break; }
        if (!ok) return mala_errf(err, "%s: truncated JPEG (no end-of-image marker)", name);
    } else if (p->fmt == FMT_PNM) {
        if (pnm_header(head, hn, name, &p->pnm, err)) return -1;
        uint64_t need = (uint64_t)p->pnm.w * p->pnm.h * p->pnm.c * p->pnm.bps;
        if (size - p->pnm.data_off < need)
            return mala_errf(err, "%s: truncated PGM/PPM (%llu of %llu sample bytes)", name,
                             (unsigned long long)(size - p->pnm.data_off), (unsigned long long)need);
        p->w = p->pnm.w;
        p->h = p->pnm.h;
    }
    if (p->fmt == FMT_PNG || p->fmt == FMT_BMP) header_size(p->fmt, head, hn, &p->w, &p->h);
    // the limits before any decoder runs (stb_image's own header parse comes after this)
    if ((p->w || p->h) && check_size(p, name, lim, err)) return -1;
    return 0;
}

static int stb_failure(const char *name, const char *what, MalaErr *err) {
    const char *why = stbi_failure_reason();
    return mala_errf(err, "%s: %s (%s)", name, what, why ? why : "unknown error");
}

// ---- JPEG (libjpeg-turbo) ----

#define JPEG_MAX_SCANS 500   // libjpeg-turbo's advice against progressive files of endless scans

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int eof;                 // "premature end of JPEG file": the data ran out (a truncated file)
} JpegErr;

static void jpeg_fail(j_common_ptr c) {
    JpegErr *e = (JpegErr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jb, 1);
}

static void jpeg_message(j_common_ptr c, int level) {  // warnings are not printed; one is an error
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) ((JpegErr *)c->err)->eof = 1;
}

static void jpeg_progress(j_common_ptr c) {
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > JPEG_MAX_SCANS) {
        JpegErr *e = (JpegErr *)c->err;
        snprintf(e->msg, sizeof e->msg, "more than %d scans", JPEG_MAX_SCANS);
        longjmp(e->jb, 1);
    }
}

// PIL's CMYK -> RGB (Convert.c cmyk2rgb) on samples that Adobe files store inverted (PIL reads
// them as "CMYK;I").
static void cmyk_to_rgb(uint8_t *rgb, const uint8_t *cmyk, int n, int inverted) {
    for (int i = 0; i < n; i++) {
        int v[4];
        for (int k = 0; k < 4; k++) v[k] = inverted ? 255 - cmyk[4 * i + k] : cmyk[4 * i + k];
        int nk = 255 - v[3];
        for (int k = 0; k < 3; k++) {
            int t = v[k] * nk + 128, m = ((t >> 8) + t) >> 8, r = nk - m;
            rgb[3 * i + k] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
        }
    }
}

// Reads the header (from buf, or from f when buf is NULL), checks the size against lim, and with
// rgb non-NULL decodes to RGB (gray replicated, CMYK as PIL converts it).
static int jpeg_read(const unsigned char *buf, size_t len, FILE *f, const char *name, const ImageLimits *lim,
                     uint8_t **rgb, int *w, int *h, MalaErr *err) {
    struct jpeg_decompress_struct c;
    struct jpeg_progress_mgr pm = {.progress_monitor = jpeg_progress};
    JpegErr je = {.eof = 0};
    uint8_t *volatile out = NULL, *volatile row = NULL;
    c.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jpeg_fail;
    je.pub.emit_message = jpeg_message;
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&c);
        free(out);
        free(row);
        return mala_errf(err, "%s: cannot decode JPEG (%s)", name, je.msg);
    }
    jpeg_create_decompress(&c);
    c.progress = &pm;
    if (buf) jpeg_mem_src(&c, buf, (unsigned long)len);
    else jpeg_stdio_src(&c, f);
    jpeg_read_header(&c, TRUE);
    Probe p = {.fmt = FMT_JPEG, .w = c.image_width > INT32_MAX ? INT32_MAX : (int)c.image_width,
               .h = c.image_height > INT32_MAX ? INT32_MAX : (int)c.image_height};
    if (check_size(&p, name, lim, err)) { jpeg_destroy_decompress(&c); return -1; }
    *w = p.w;
    *h = p.h;
    if (!rgb) { jpeg_destroy_decompress(&c); return 0; }
    int cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
    c.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&c);
    if ((int)c.output_width != p.w || (int)c.output_height != p.h || c.output_components != (cmyk ? 4 : 3)) {
        snprintf(je.msg, sizeof je.msg, "the decoder gives %ux%ux%d", c.output_width, c.output_height, c.output_components);
        longjmp(je.jb, 1);
    }
    out = malloc((size_t)p.w * p.h * 3);
    if (cmyk) row = malloc((size_t)p.w * 4);
    if (!out || (cmyk && !row)) { snprintf(je.msg, sizeof je.msg, "out of memory"); longjmp(je.jb, 1); }
    while (c.output_scanline < c.output_height) {
        uint8_t *dst = out + (size_t)c.output_scanline * p.w * 3;
        JSAMPROW r = cmyk ? row : dst;
        if (jpeg_read_scanlines(&c, &r, 1) != 1) break;
        if (cmyk) cmyk_to_rgb(dst, row, p.w, c.saw_Adobe_marker);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    free(row);
    if (je.eof) { free(out); return mala_errf(err, "%s: truncated JPEG (the compressed data ends early)", name); }
    *rgb = out;
    return 0;
}

int image_probe(const void *buf, size_t len, const char *name, const ImageLimits *lim, int *w, int *h, MalaErr *err) {
    ImageLimits dl = image_limits_default();
    if (!lim) lim = &dl;
    const unsigned char *b = buf;
    size_t tn = len < TAIL_LEN ? len : TAIL_LEN;
    Probe p = {0};
    if (probe_ends(b, len, b + len - tn, tn, len, name, lim, &p, err)) return -1;
    int comp;
    if (p.fmt == FMT_PNG && png_chunks_fit(mem_at, (void *)b, len, name, err)) return -1;
    if (p.fmt == FMT_JPEG) {
        if (jpeg_read(b, len, NULL, name, lim, NULL, &p.w, &p.h, err)) return -1;
    } else if (p.fmt != FMT_PNM && !stbi_info_from_memory(b, (int)len, &p.w, &p.h, &comp)) {
        return stb_failure(name, "not a readable image", err);
    }
    if (check_size(&p, name, lim, err)) return -1;
    if (w) *w = p.w;
    if (h) *h = p.h;
    return 0;
}

// Samples rescaled from 0..maxval to 0..255 (rounded), converted to `channels`.
static uint8_t *pnm_decode(const unsigned char *b, const Pnm *h, int channels) {
    size_t n = (size_t)h->w * h->h;
    uint8_t *out = malloc(n * (size_t)channels);
    if (!out) return NULL;
    const unsigned char *s = b + h->data_off;
    uint32_t M = (uint32_t)h->maxval;
    for (size_t i = 0; i < n; i++) {
        uint8_t v[3];
        for (int k = 0; k < h->c; k++) {
            uint32_t x = h->bps == 2 ? (uint32_t)s[0] << 8 | s[1] : s[0];
            s += h->bps;
            if (x > M) x = M;
            v[k] = (uint8_t)((x * 255 + M / 2) / M);
        }
        if (h->c == 1) v[1] = v[2] = v[0];
        if (channels == 3) memcpy(out + 3 * i, v, 3);
        else out[i] = h->c == 1 ? v[0] : image_rgb_to_l(v);
    }
    return out;
}

// Takes over a malloc'd RGB image: as it is (channels 3) or in PIL's "L" (channels 1).
static int rgb_to_channels(uint8_t *rgb, int w, int h, int channels, uint8_t **pixels, const char *name, MalaErr *err) {
    if (channels == 3) { *pixels = rgb; return 0; }
    size_t n = (size_t)w * (size_t)h;
    uint8_t *g = malloc(n ? n : 1);
    if (!g) { free(rgb); return mala_errf(err, "%s: out of memory", name); }
    for (size_t i = 0; i < n; i++) g[i] = image_rgb_to_l(rgb + 3 * i);
    free(rgb);
    *pixels = g;
    return 0;
}

int image_decode(const void *buf, size_t len, const char *name, int channels, const ImageLimits *lim,
                 uint8_t **pixels, int *w, int *h, MalaErr *err) {
    *pixels = NULL;
    if (channels != 1 && channels != 3) return mala_errf(err, "%s: image_decode wants 1 or 3 channels, got %d", name, channels);
    ImageLimits dl = image_limits_default();
    if (!lim) lim = &dl;
    const unsigned char *b = buf;
    size_t tn = len < TAIL_LEN ? len : TAIL_LEN;
    Probe p = {0};
    if (probe_ends(b, len, b + len - tn, tn, len, name, lim, &p, err)) return -1;
    int comp;
    if (p.fmt == FMT_JPEG) {
        uint8_t *rgb = NULL;
        if (jpeg_read(b, len, NULL, name, lim, &rgb, w, h, err)) return -1;
        return rgb_to_channels(rgb, *w, *h, channels, pixels, name, err);
    }
    if (p.fmt == FMT_PNG && png_chunks_fit(mem_at, (void *)b, len, name, err)) return -1;
    if (p.fmt != FMT_PNM && !stbi_info_from_memory(b, (int)len, &p.w, &p.h, &comp))
        return stb_failure(name, "not a readable image", err);
    if (check_size(&p, name, lim, err)) return -1;
    if (p.fmt == FMT_PNM) {
        if (!(*pixels = pnm_decode(b, &p.pnm, channels))) return mala_errf(err, "%s: out of memory", name);
        *w = p.w;
        *h = p.h;
        return 0;
    }
    // RGB from stb_image (gray replicated, alpha dropped, 16-bit samples reduced to their high
    // byte), then PIL's "L" weights for gray: the same pixels as PIL's convert("RGB") / ("L").
    int dw = 0, dh = 0;
    uint8_t *rgb = stbi_load_from_memory(b, (int)len, &dw, &dh, &comp, 3);
    if (!rgb) return stb_failure(name, "cannot decode image", err);
    if (dw != p.w || dh != p.h) {
        stbi_image_free(rgb);
        return mala_errf(err, "%s: decoded %dx%d pixels, the header says %dx%d", name, dw, dh, p.w, p.h);
    }
    *w = dw;
    *h = dh;
    return rgb_to_channels(rgb, dw, dh, channels, pixels, name, err);
}

// A regular file no larger than the limit, opened for reading; *size gets its length.
static FILE *open_image(const char *path, const ImageLimits *lim, uint64_t *size, MalaErr *err) {
    FILE *f = fopen(path, "rb");
    if (!f) { mala_errf(err, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        mala_errf(err, "%s: not a regular file", path);
        return NULL;
    }
    if ((uint64_t)st.st_size > (uint64_t)lim->max_file_bytes) {
        fclose(f);
        mala_errf(err, "%s: %lld bytes, more than the %lld an image file may have", path, (long long)st.st_size,
                  (long long)lim->max_file_bytes);
        return NULL;
    }
    *size = (uint64_t)st.st_size;
    return f;
}

int image_load(const char *path, int channels, uint8_t **pixels, int *w, int *h, MalaErr *err) {
    *pixels = NULL;
    ImageLimits lim = image_limits_default();
    uint64_t size;
    FILE *f = open_image(path, &lim, &size, err);
    if (!f) return -1;
    unsigned char *buf = malloc(size ? (size_t)size : 1);
    if (!buf) { fclose(f); return mala_errf(err, "%s: out of memory for %llu bytes", path, (unsigned long long)size); }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    int rc = got == size ? image_decode(buf, (size_t)size, path, channels, &lim, pixels, w, h, err)
                         : mala_errf(err, "%s: read error", path);
    free(buf);
    return rc;
}

int image_check(const char *path, int *w, int *h, MalaErr *err) {
    ImageLimits lim = image_limits_default();
    uint64_t size;
    FILE *f = open_image(path, &lim, &size, err);
    if (!f) return -1;
    unsigned char head[HEAD_LEN], tail[TAIL_LEN];
    size_t hn = fread(head, 1, sizeof head, f), tn = size < TAIL_LEN ? (size_t)size : TAIL_LEN;
    if (fseeko(f, (off_t)(size - tn), SEEK_SET) != 0 || fread(tail, 1, tn, f) != tn) tn = 0;
    Probe p = {0};
    int rc = probe_ends(head, hn, tail, tn, size, path, &lim, &p, err), comp;
    if (!rc && p.fmt == FMT_PNG) rc = png_chunks_fit(file_at, f, size, path, err);
    if (!rc && p.fmt != FMT_PNM && fseeko(f, 0, SEEK_SET) != 0) rc = mala_errf(err, "%s: cannot seek", path);
    else if (!rc && p.fmt == FMT_JPEG) rc = jpeg_read(NULL, 0, f, path, &lim, NULL, &p.w, &p.h, err);
    else if (!rc && p.fmt != FMT_PNM && !stbi_info_from_file(f, &p.w, &p.h, &comp))
        rc = stb_failure(path, "not a readable image", err);
    fclose(f);
    if (!rc) rc = check_size(&p, path, &lim, err);
    if (rc) return -1;
    if (w) *w = p.w;
    if (h) *h = p.h;
    return 0;
}

int image_write_png(const char *path, const uint8_t *pixels, int w, int h, int channels, MalaErr *err) {
    return image_write_png_text(path, pixels, w, h, channels, NULL, NULL, err);
}

int image_encode_png_text(const uint8_t *pixels, int w, int h, int channels, const char *keyword, const char *text,
                          const char *name, uint8_t **out, size_t *out_len, MalaErr *err) {
    *out = NULL;
    *out_len = 0;
    if (w <= 0 || h <= 0 || channels < 1 || channels > 4)
        return mala_errf(err, "%s: bad PNG geometry %dx%dx%d", name, w, h, channels);
    int len = 0;
    unsigned char *png = stbi_write_png_to_mem(pixels, w * channels, w, h, channels, &len);
    if (!png) return mala_errf(err, "%s: PNG encoding failed", name);
    if (keyword) {
        int rc = png_text_add(png, (size_t)len, name, keyword, text, out, out_len, err);
        STBIW_FREE(png);
        return rc;
    }
    *out = malloc((size_t)len);
    if (*out) memcpy(*out, png, (size_t)len);
    STBIW_FREE(png);
    if (!*out) return mala_errf(err, "%s: out of memory for a PNG of %d bytes", name, len);
    *out_len = (size_t)len;
    return 0;
}

int image_write_png_text(const char *path, const uint8_t *pixels, int w, int h, int channels, const char *keyword,
                         const char *text, MalaErr *err) {
    uint8_t *png;
    size_t len;
    if (image_encode_png_text(pixels, w, h, channels, keyword, text, path, &png, &len, err)) return -1;
    int rc = atomic_write_file(path, png, len, err);
    free(png);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// PIL resampling (Pillow src/libImaging/Resample.c, 8 bits per channel)

#define PRECISION_BITS (32 - 8 - 2)

static double filter_box(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }
static double filter_bilinear(double x) { if (x < 0) x = -x; return x < 1.0 ? 1.0 - x : 0.0; }
static double filter_bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

// Returns ksize; fills bounds[2*out] (xmin, count) and integer coefficients kk[out*ksize].
static int precompute_coeffs(int in_size, int out_size, ImageFilter f, int **boundsp, int32_t **kkp) {
    double (*filter)(double) = f == IMAGE_BOX ? filter_box : f == IMAGE_BILINEAR ? filter_bilinear : filter_bicubic;
    double support0 = f == IMAGE_BOX ? 0.5 : f == IMAGE_BILINEAR ? 1.0 : 2.0;
    double scale = (double)((float)in_size - 0.0f) / out_size, filterscale = scale;
    if (filterscale < 1.0) filterscale = 1.0;
    double support = support0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = xmalloc(sizeof(int) * 2 * (size_t)out_size);
    double *kd = xmalloc(sizeof(double) * (size_t)out_size * (size_t)ksize);
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double *k = kd + (size_t)xx * ksize;
        int x;
        for (x = 0; x < xmax; x++) { double wgt = filter((x + xmin - center + 0.5) * ss); k[x] = wgt; ww += wgt; }
        for (x = 0; x < xmax; x++) if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        bounds[2 * xx] = xmin; bounds[2 * xx + 1] = xmax;
    }
    int32_t *kk = xmalloc(sizeof(int32_t) * (size_t)out_size * (size_t)ksize);
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++)
        kk[i] = kd[i] < 0 ? (int32_t)(-0.5 + kd[i] * (1 << PRECISION_BITS)) : (int32_t)(0.5 + kd[i] * (1 << PRECISION_BITS));
    free(kd);
    *boundsp = bounds; *kkp = kk;
    return ksize;
}

static inline uint8_t clip8(int v) {
    if (v >= (1 << PRECISION_BITS << 8)) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> PRECISION_BITS);
}

void image_resize(uint8_t *dst, int ow, int oh, const uint8_t *src, int w, int h, int c, ImageFilter filter) {
    int need_h = ow != w, need_v = oh != h;
    if (!need_h && !need_v) { memcpy(dst, src, (size_t)w * h * c); return; }
    int *bh = NULL, *bv = NULL;
    int32_t *kh = NULL, *kv = NULL;
    int ksh = precompute_coeffs(w, ow, filter, &bh, &kh);
    int ksv = precompute_coeffs(h, oh, filter, &bv, &kv);
    int yfirst = bv[0], ylast = bv[2 * oh - 2] + bv[2 * oh - 1];
    const uint8_t *vin = src;   // input of the vertical pass
    uint8_t *tmp = NULL;
    if (need_h) {
        for (int i = 0; i < oh; i++) bv[2 * i] -= yfirst;
        int rows = ylast - yfirst;
        uint8_t *out = need_v ? (tmp = xmalloc((size_t)ow * rows * c)) : dst;
        for (int yy = 0; yy < rows; yy++) {
            const uint8_t *row = src + (size_t)(yy + yfirst) * w * c;
            uint8_t *orow = out + (size_t)yy * ow * c;
            for (int xx = 0; xx < ow; xx++) {
                int xmin = bh[2 * xx], xmax = bh[2 * xx + 1];
                const int32_t *k = kh + (size_t)xx * ksh;
                for (int ch = 0; ch < c; ch++) {
                    int ss = 1 << (PRECISION_BITS - 1);
                    for (int x = 0; x < xmax; x++) ss += row[(size_t)(x + xmin) * c + ch] * k[x];
                    orow[(size_t)xx * c + ch] = clip8(ss);
                }
            }
        }
        vin = tmp;
    }
    if (need_v) {
        int iw = ow;   // after the horizontal pass (or unchanged width)
        for (int yy = 0; yy < oh; yy++) {
            int ymin = bv[2 * yy], ymax = bv[2 * yy + 1];
            const int32_t *k = kv + (size_t)yy * ksv;
            uint8_t *orow = dst + (size_t)yy * ow * c;
            for (int xx = 0; xx < iw * c; xx++) {
                int ss = 1 << (PRECISION_BITS - 1);
                for (int y = 0; y < ymax; y++) ss += vin[(size_t)(y + ymin) * iw * c + xx] * k[y];
                orow[xx] = clip8(ss);
            }
        }
    }
    free(tmp); free(bh); free(bv); free(kh); free(kv);
}

int image_center_crop_arr(uint8_t *dst, int size, const uint8_t *src, int w, int h, int c) {
    if (size <= 0 || w <= 0 || h <= 0 || c <= 0) return -1;
    const uint8_t *cur = src;
    uint8_t *own = NULL;
    while ((w < h ? w : h) >= 2 * size) {
        int nw = w / 2, nh = h / 2;
        uint8_t *next = xmalloc((size_t)nw * nh * c);
        image_resize(next, nw, nh, cur, w, h, c, IMAGE_BOX);
        free(own);
        own = next; cur = next; w = nw; h = nh;
    }
    double scale = (double)size / (w < h ? w : h);
    int nw = (int)nearbyint(w * scale), nh = (int)nearbyint(h * scale);   // half to even, as Python's round
    if (nw < size || nh < size) { free(own); return -1; }
    uint8_t *res = xmalloc((size_t)nw * nh * c);
    image_resize(res, nw, nh, cur, w, h, c, IMAGE_BICUBIC);
    free(own);
    int cy = (nh - size) / 2, cx = (nw - size) / 2;
    for (int y = 0; y < size; y++)
        memcpy(dst + (size_t)y * size * c, res + ((size_t)(y + cy) * nw + cx) * c, (size_t)size * c);
    free(res);
    return 0;
}

void image_u8_to_float(float *chw, const uint8_t *hwc, int w, int h, int c, int hflip) {
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int sx = hflip ? w - 1 - x : x;
                chw[((size_t)ch * h + y) * w + x] = (float)hwc[((size_t)y * w + sx) * c + ch] / 127.5f - 1.0f;
            }
}

// ---------------------------------------------------------------------------------------------
// sample grids (torchvision.utils.make_grid + save_image)

static inline uint8_t to_u8_torchvision(float v) {
    if (v != v) return 0;                     // NaN
    v = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
    v = (v + 1.0f) / 2.0f;                    // sub_(low).div_(high - low)
    v = v * 255.0f + 0.5f;                    // mul(255).add_(0.5)
    v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
    return (uint8_t)v;                        // to(uint8) truncates
}

int image_grid_u8(uint8_t **rgb, int *gw, int *gh, const float *x, int n, int c, int h, int w,
                  int nrow, int padding, MalaErr *err) {
    *rgb = NULL;
    if (n <= 0 || (c != 1 && c != 3) || h <= 0 || w <= 0 || nrow <= 0 || padding < 0)
        return mala_errf(err, "image grid: bad geometry n=%d c=%d h=%d w=%d nrow=%d padding=%d", n, c, h, w, nrow, padding);
    int pad = n == 1 ? 0 : padding;
    int xmaps = nrow < n ? nrow : n, ymaps = (n + xmaps - 1) / xmaps;
    int W = n == 1 ? w : xmaps * (w + pad) + pad, H = n == 1 ? h : ymaps * (h + pad) + pad;
    uint8_t *g = calloc((size_t)W * H * 3, 1);
    if (!g) return mala_errf(err, "image grid: out of memory (%dx%d)", W, H);
    for (int k = 0; k < n; k++) {
        int oy = (k / xmaps) * (h + pad) + pad, ox = (k % xmaps) * (w + pad) + pad;
        const float *img = x + (size_t)k * c * h * w;
        for (int y = 0; y < h; y++)
            for (int xx = 0; xx < w; xx++)
                for (int ch = 0; ch < 3; ch++) {
                    float v = img[((size_t)(c == 1 ? 0 : ch) * h + y) * w + xx];
                    g[((size_t)(oy + y) * W + ox + xx) * 3 + ch] = to_u8_torchvision(v);
                }
    }
    *rgb = g; *gw = W; *gh = H;
    return 0;
}

int image_save_grid(const char *path, const float *x, int n, int c, int h, int w, int nrow, int padding,
                    MalaErr *err) {
    return image_save_grid_text(path, x, n, c, h, w, nrow, padding, NULL, NULL, err);
}

int image_save_grid_text(const char *path, const float *x, int n, int c, int h, int w, int nrow, int padding,
                         const char *keyword, const char *text, MalaErr *err) {
    uint8_t *g; int W, H;
    if (image_grid_u8(&g, &W, &H, x, n, c, h, w, nrow, padding, err)) {
        char msg[MALA_ERR_LEN];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return mala_errf(err, "%s: %s", path, msg);
    }
    int rc = image_write_png_text(path, g, W, H, 3, keyword, text, err);
    free(g);
    return rc;
}
