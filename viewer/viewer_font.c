// defines: font_width, font_height, font_draw, font_fit
// Text for the viewer from stb_easy_font (a header-only vector of axis-aligned segments for
// printable ASCII, shipped with stb): each glyph is a handful of rectangles, drawn scaled with
// SDL_RenderFillRects, so no font file or font library is needed. Bytes outside ' '..'~' are
// drawn as '?'.
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-braces"
#include <stb_easy_font.h>
#pragma GCC diagnostic pop

#include "viewer/viewer.h"

#define FONT_CHUNK 128                  // characters converted per stb_easy_font_print call
#define FONT_VBUF (FONT_CHUNK * 300)    // stb_easy_font: ~270 bytes per character
#define FONT_CAP_HEIGHT 7               // rows of a capital letter

// Copies up to FONT_CHUNK characters of s into buf as printable ASCII; returns how many.
static int printable_chunk(char *buf, const char *s) {
    int n = 0;
    for (; n < FONT_CHUNK && s[n]; n++) {
        unsigned char ch = (unsigned char)s[n];
        buf[n] = ch >= 32 && ch < 127 ? (char)ch : '?';
    }
    buf[n] = 0;
    return n;
}

int font_width(const char *s, int scale) {
    char buf[FONT_CHUNK + 1];
    int w = 0;
    for (int n; (n = printable_chunk(buf, s)) > 0; s += n) w += stb_easy_font_width(buf);
    return w * scale;
}

int font_height(int scale) { return FONT_CAP_HEIGHT * scale; }

// Draws one chunk at (x, y) and returns its width in font units.
static int draw_chunk(SDL_Renderer *ren, int x, int y, int scale, const char *text) {
    static char vbuf[FONT_VBUF];
    static SDL_Rect rects[FONT_VBUF / 64];
    int quads = stb_easy_font_print(0, 0, (char *)text, NULL, vbuf, sizeof vbuf);
    for (int q = 0; q < quads; q++) {
        float v0[2], v2[2];  // a quad's first and third vertices: its top-left and bottom-right corners
        memcpy(v0, vbuf + q * 64, sizeof v0);
        memcpy(v2, vbuf + q * 64 + 32, sizeof v2);
        rects[q] = (SDL_Rect){x + (int)v0[0] * scale, y + (int)v0[1] * scale, (int)(v2[0] - v0[0]) * scale,
                              (int)(v2[1] - v0[1]) * scale};
    }
    SDL_RenderFillRects(ren, rects, quads);
    return stb_easy_font_width((char *)text);
}

void font_draw(SDL_Renderer *ren, int x, int y, int scale, SDL_Color c, const char *s) {
    SDL_SetRenderDrawColor(ren, c.r, c.g, c.b, c.a);
    char buf[FONT_CHUNK + 1];
    for (int n; (n = printable_chunk(buf, s)) > 0; s += n) x += draw_chunk(ren, x, y, scale, buf) * scale;
}

int font_fit(char *buf, size_t n, const char *s, int scale, int max_w) {
    snprintf(buf, n, "%s", s);
    if (font_width(buf, scale) <= max_w) return 0;
    for (int len = (int)strlen(buf) - 1; len >= 0; len--) {
        snprintf(buf, n, "%.*s..", len, s);
        if (font_width(buf, scale) <= max_w) break;
    }
    return 1;
}
