// gsm8k.c: GSM8K answer extraction and scoring (see gsm8k.h).
#include "reward/gsm8k.h"

#include <string.h>

#include "core/common.h"

#define CLIP_CHARS 300

static int in_class(char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; }

// Length of the match of "-?[0-9.,]+" at s[i] (0: no match), like Python's re at that position.
static size_t num_at(const char *s, size_t n, size_t i) {
    size_t j = i;
    if (j < n && s[j] == '-' && j + 1 < n && in_class(s[j + 1])) j++;
    if (j >= n || !in_class(s[j])) return 0;
    while (j < n && in_class(s[j])) j++;
    return j - i;
}

char *gsm8k_extract(const char *s, size_t n, gsm8k_method method) {
    // s[-300:] in code points: step back over 300 UTF-8 lead bytes.
    size_t start = n, chars = 0;
    while (start > 0 && chars < CLIP_CHARS) {
        start--;
        if (((unsigned char)s[start] & 0xC0) != 0x80) chars++;
    }
    if (chars < CLIP_CHARS) start = 0;
    const char *t = s + start;
    size_t m = n - start;
    size_t best_i = 0, best_n = 0, first_i = 0, first_n = 0;
    int found = 0, have_first = 0;
    if (method == GSM8K_STRICT) {
        for (size_t i = 0; i + 5 <= m;) {
            if (memcmp(t + i, "#### ", 5) == 0) {
                size_t k = num_at(t, m, i + 5);
                if (k) { best_i = i + 5; best_n = k; found = 1; i += 5 + k; continue; }
            }
            i++;
        }
        if (!found) return NULL;
        char *r = rlc_malloc(best_n + 1);
        size_t o = 0;
        for (size_t k = 0; k < best_n; k++)
            if (t[best_i + k] != ',' && t[best_i + k] != '$') r[o++] = t[best_i + k];
        r[o] = 0;
        return r;
    }
    for (size_t i = 0; i < m;) {
        size_t k = num_at(t, m, i);
        if (!k) { i++; continue; }
        if (!have_first) { first_i = i; first_n = k; have_first = 1; }
        if (!(k == 1 && t[i] == '.')) { best_i = i; best_n = k; found = 1; }
        i += k;
    }
    if (!have_first) return NULL;
    if (!found) { best_i = first_i; best_n = first_n; }   // every match was "."
    char *r = rlc_malloc(best_n + 1);
    memcpy(r, t + best_i, best_n);
    r[best_n] = 0;
    return r;
}

double gsm8k_compute_score(const char *solution, const char *ground_truth, gsm8k_method method, double format_score,
                           double score) {
    char *a = gsm8k_extract(solution, strlen(solution), method);
    if (!a) return 0.0;
    double r = strcmp(a, ground_truth) == 0 ? score : format_score;
    free(a);
    return r;
}
