// defines: base64_encode, base64_decode
#include "server/base64.h"

#include <stdlib.h>
#include <string.h>

static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const uint8_t *b, size_t n) {
    char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
    if (!s) return NULL;
    size_t i = 0;
    for (; i + 3 <= n; i += 3, o += 4) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        o[0] = ALPHABET[v >> 18], o[1] = ALPHABET[v >> 12 & 63], o[2] = ALPHABET[v >> 6 & 63], o[3] = ALPHABET[v & 63];
    }
    if (n - i) {
        uint32_t v = (uint32_t)b[i] << 16 | (n - i == 2 ? (uint32_t)b[i + 1] << 8 : 0);
        o[0] = ALPHABET[v >> 18], o[1] = ALPHABET[v >> 12 & 63];
        o[2] = n - i == 2 ? ALPHABET[v >> 6 & 63] : '=';
        o[3] = '=';
        o += 4;
    }
    *o = 0;
    return s;
}

static int value_of(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int base64_decode(const char *s, size_t n, size_t max, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (n >= 5 && !memcmp(s, "data:", 5)) {  // data:[<type>][;base64],<data>
        const char *comma = memchr(s, ',', n);
        if (!comma) return -1;
        size_t head = (size_t)(comma - s);
        if (head < 12 || memcmp(comma - 7, ";base64", 7)) return -1;
        n -= head + 1;
        s = comma + 1;
    }
    size_t cap = n / 4 * 3 + 3;
    if (cap > max + 3) cap = max + 3;
    uint8_t *b = malloc(cap ? cap : 1);
    if (!b) return -1;
    uint32_t acc = 0;
    int k = 0, pad = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = value_of(c);
        if (v < 0 || pad) goto bad;  // a character outside the alphabet, or data after padding
        acc = acc << 6 | (uint32_t)v;
        if (++k == 4) {
            if (o + 3 > max) goto bad;
            b[o++] = (uint8_t)(acc >> 16), b[o++] = (uint8_t)(acc >> 8), b[o++] = (uint8_t)acc;
            acc = 0, k = 0;
        }
    }
    if (k == 1 || pad > 2 || (pad && k + pad != 4)) goto bad;  // a lone sextet, or padding that does not end a quantum
    if (k) {
        if (o + (size_t)k - 1 > max) goto bad;
        acc <<= 6 * (4 - k);
        b[o++] = (uint8_t)(acc >> 16);
        if (k == 3) b[o++] = (uint8_t)(acc >> 8);
    }
    *out = b;
    *len = o;
    return 0;
bad:
    free(b);
    return -1;
}
