// "Did you mean": the candidate closest to a mistyped word (flags, subcommands, class names).
#ifndef MALA_SUGGEST_H
#define MALA_SUGGEST_H

// The candidate closest to word by edit distance (Levenshtein) when it is close enough to be a
// typo (at most a third of the word's letters, and at least 2), else NULL. NULL candidates are skipped.
const char *text_suggest(const char *word, const char *const *cands, int n);

#endif
