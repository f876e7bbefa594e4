// defines: text_suggest
#include "core/suggest.h"

#include <string.h>

// Levenshtein distance (two rows of the dynamic programme).
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 128 || lb > 128) return 1 << 20;
    int prev[129], cur[129];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof(int));
    }
    return prev[lb];
}

const char *text_suggest(const char *word, const char *const *cands, int n) {
    const char *best = NULL;
    int bd = 1 << 20;
    for (int i = 0; i < n; i++) {
        if (!cands[i]) continue;
        int d = edit_distance(word, cands[i]);
        if (d < bd) { bd = d; best = cands[i]; }
    }
    int len = (int)strlen(word), limit = len / 3 > 2 ? len / 3 : 2;  // a typo, not another word
    return bd <= limit ? best : NULL;
}
