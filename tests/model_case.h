// model_case.h: the harness test_model.c and test_families.c share: a random small model with a packed
// batch (tokens, next-token targets, per-token seeds of the backward), written for the torch reference as an
// HF checkpoint plus case.json, and one forward + log-prob + backward run of it.
#pragma once
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "io/checkpoint.h"
#include "model/decoder.h"
#include "testlib.h"

typedef struct {
    const char *name;
    float temperature;
    int n_seqs;
    model_config cfg;
    param_layout pl;
    param_set ps;
    int64_t T;
    int32_t *tokens, *cu, *pos, *targets;   // (T), (n_seqs + 1), (T), (T): -1 at each sequence's end
    float *dlogp, *dent;                     // (T) d(loss)/d(log-prob), d(loss)/d(entropy)
    decoder_batch b;
    char *dir;                               // where case_write put it (NULL before)
} case_data;

// Weights that keep activations O(1) and logits over a few units: norms 1 + N(0, 0.2) (Gemma's (1 + w): N(0, 0.2)),
// biases N(0, 0.2), matrices N(0, 0.7/sqrt(in)), the output matrix N(0, 2/sqrt(in)).
static inline void mc_random_params(param_set *ps, tl_rng *r) {
    const param_layout *pl = ps->layout;
    const int plus_one = pl->cfg.norm_plus_one;
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *t = &pl->tensors[i];
        float *p = ps->data + t->offset;
        if (strstr(t->name, ".bias")) tl_fill_normal(r, p, t->numel, 0.2f);
        else if (t->ndim == 1) for (int64_t j = 0; j < t->numel; j++) p[j] = (plus_one ? 0.0f : 1.0f) + tl_normal(r, 0.2f);
        else if (strstr(t->name, "embed_tokens")) tl_fill_normal(r, p, t->numel, (plus_one ? 0.3f : 2.0f) / sqrtf((float)t->shape[1]));   // tied: also the output matrix
        else tl_fill_normal(r, p, t->numel, (strstr(t->name, "lm_head") ? 2.0f : 0.7f) / sqrtf((float)t->shape[1]));
    }
}

// A model of config `cfg` (finalized) with random weights, and a packed batch of n_seqs sequences of lens[].
static inline void case_build(case_data *cd, const char *name, const model_config *cfg, float temperature, int n_seqs,
                              const int *lens, uint64_t seed) {
    memset(cd, 0, sizeof *cd);
    cd->name = name;
    cd->temperature = temperature;
    cd->n_seqs = n_seqs;
    tl_rng r;
    tl_rng_init(&r, seed);
    cd->cfg = *cfg;
    param_layout_init(&cd->pl, &cd->cfg);
    param_set_init(&cd->ps, &cd->pl);
    mc_random_params(&cd->ps, &r);
    int64_t T = 0;
    for (int s = 0; s < n_seqs; s++) T += lens[s];
    cd->T = T;
    cd->tokens = malloc((size_t)T * 4); cd->pos = malloc((size_t)T * 4); cd->targets = malloc((size_t)T * 4);
    cd->cu = malloc((size_t)(n_seqs + 1) * 4);
    cd->dlogp = malloc((size_t)T * 4); cd->dent = malloc((size_t)T * 4);
    cd->cu[0] = 0;
    for (int s = 0; s < n_seqs; s++) cd->cu[s + 1] = cd->cu[s] + lens[s];
    const int V = cd->cfg.vocab_size;
    for (int64_t t = 0; t < T; t++) {
        cd->tokens[t] = (int32_t)(tl_uniform(&r, 0, 1) * V) % V;
        cd->dlogp[t] = tl_normal(&r, 1.0f);
        cd->dent[t] = tl_normal(&r, 1.0f);
    }
    // target = the next token of the same sequence; none (-1) at each sequence's end
    for (int s = 0; s < n_seqs; s++)
        for (int32_t t = cd->cu[s]; t < cd->cu[s + 1]; t++) cd->targets[t] = t + 1 < cd->cu[s + 1] ? cd->tokens[t + 1] : -1;
    cd->b = (decoder_batch){.T = T, .n_seqs = n_seqs, .tokens = cd->tokens, .cu_seqlens = cd->cu, .pos = cd->pos};
    decoder_batch_positions(&cd->b);
}

static inline void case_free(case_data *cd) {
    free(cd->tokens); free(cd->pos); free(cd->targets); free(cd->cu); free(cd->dlogp); free(cd->dent);
    param_set_free(&cd->ps);
    param_layout_free(&cd->pl);
    free(cd->dir);
}

static inline void json_ints(FILE *f, const char *key, const int32_t *x, int64_t n) {
    fprintf(f, "\"%s\": [", key);
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", x[i]);
    fprintf(f, "]");
}
static inline void json_floats(FILE *f, const char *key, const float *x, int64_t n) {
    fprintf(f, "\"%s\": [", key);
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%.9g", i ? "," : "", x[i]);
    fprintf(f, "]");
}

// The case as the torch side reads it, in root/case<idx>: rlc's checkpoint (config.json written by
// model_config_to_json, model.safetensors with the HF names) plus case.json (batch, seeds, temperature, and
// the order of the gradients it writes back).
static inline void case_write(case_data *cd, const char *root, int idx) {
    char sub[64];
    snprintf(sub, sizeof sub, "case%d", idx);
    cd->dir = rlc_path_join(root, sub);
    checkpoint_save(cd->dir, &cd->ps, ST_F32);
    char *p = rlc_path_join(cd->dir, "case.json");
    FILE *f = fopen(p, "w");
    CHECK(f, "open %s", p);
    fprintf(f, "{");
    json_ints(f, "tokens", cd->tokens, cd->T); fprintf(f, ",\n");
    json_ints(f, "targets", cd->targets, cd->T); fprintf(f, ",\n");
    json_ints(f, "cu_seqlens", cd->cu, cd->n_seqs + 1); fprintf(f, ",\n");
    json_floats(f, "dlogp", cd->dlogp, cd->T); fprintf(f, ",\n");
    json_floats(f, "dentropy", cd->dent, cd->T); fprintf(f, ",\n");
    fprintf(f, "\"temperature\": %.9g,\n\"grad_names\": [", cd->temperature);
    for (int i = 0; i < cd->pl.n_tensors; i++) fprintf(f, "%s\"%s\"", i ? "," : "", cd->pl.tensors[i].name);
    fprintf(f, "]}\n");
    fclose(f);
    free(p);
}

// Forward + log-prob (+ backward into a fresh gradient set) with checkpoint mode `mode`.
typedef struct {
    float *hidden, *logp, *ent;   // (T,H), (T), (T)
    float *dhidden;               // (T,H)
    param_set g;
} run_out;

static inline void run_model(case_data *cd, decoder_model *m, ckpt_mode mode, int entropy_loss, run_out *o) {
    const int64_t T = cd->T, H = cd->cfg.hidden_size;
    o->hidden = malloc((size_t)(T * H) * 4); o->logp = malloc((size_t)T * 4); o->ent = malloc((size_t)T * 4);
    o->dhidden = malloc((size_t)(T * H) * 4);
    param_set_init(&o->g, &cd->pl);
    decoder_acts *a = decoder_acts_new(&cd->cfg, T + 3, mode);   // room for more tokens than the batch has
    decoder_forward(m, a, &cd->b, o->hidden);
    decoder_logprob(m, a, &cd->b, cd->targets, cd->temperature, o->logp, o->ent);
    decoder_backward(m, a, &cd->b, cd->targets, cd->temperature, cd->dlogp, entropy_loss ? cd->dent : NULL, &o->g);
    memcpy(o->dhidden, decoder_acts_dhidden(a), (size_t)(T * H) * 4);
    decoder_acts_free(a);
}

static inline void run_free(run_out *o) {
    free(o->hidden); free(o->logp); free(o->ent); free(o->dhidden);
    param_set_free(&o->g);
}

// The case against the torch float64 reference in case_dir/out.bin (logits, log-probs, entropy, then d(hidden)
// and every gradient, with the entropy term in the loss and without: o_noent).
static inline void compare_ref(case_data *cd, decoder_model *m, run_out *o, run_out *o_noent) {
    const int64_t T = cd->T, H = cd->cfg.hidden_size, V = cd->cfg.vocab_size;
    const char *nm = cd->name;
    const int64_t n = T * V + 2 * T + 2 * (T * H + cd->pl.numel);
    char *p = rlc_path_join(cd->dir, "out.bin");
    size_t len = 0;
    float *ref = rlc_file_exists(p) ? (float *)rlc_read_file(p, &len) : NULL;
    free(p);
    TL_CHECK(ref != NULL && (int64_t)len == n * 4, "%s: reference output missing or of the wrong size", nm);
    if (!ref || (int64_t)len != n * 4) { free(ref); return; }
    char what[200];
    float *logits = malloc((size_t)(T * V) * 4);
    decoder_logits(m, logits, o->hidden, T);
    // fp32 forward vs the float64 reference: 1e-4 leaves room for fp32 sums over H, I and the context
    snprintf(what, sizeof what, "%s logits", nm);
    tl_check_close(what, logits, ref, T * V, 1e-4);
    snprintf(what, sizeof what, "%s logp", nm);
    tl_check_close(what, o->logp, ref + T * V, T, 1e-4);
    snprintf(what, sizeof what, "%s entropy", nm);
    tl_check_close(what, o->ent, ref + T * V + T, T, 1e-4);
    // gradients: fp32 backward vs float64 autograd, per tensor (the failure names it), entropy in the loss and not
    const float *g = ref + T * V + 2 * T;
    for (int pass = 0; pass < 2; pass++) {
        run_out *r = pass ? o_noent : o;
        const char *tag = pass ? " (entropy off)" : "";
        snprintf(what, sizeof what, "%s d(hidden)%s", nm, tag);
        tl_check_close(what, r->dhidden, g, T * H, 1e-4);
        g += T * H;
        for (int i = 0; i < cd->pl.n_tensors; i++) {
            const param_tensor *t = &cd->pl.tensors[i];
            snprintf(what, sizeof what, "%s grad %s%s", nm, t->name, tag);
            tl_check_close(what, r->g.data + t->offset, g, t->numel, 1e-4);
            g += t->numel;
        }
    }
    free(logits);
    free(ref);
}

// Checkpoint modes selective and full give none's log-probs and gradients (the recompute runs the same kernels
// on the same inputs: 1e-6), and the inference path (no activations kept) gives the training path's hidden
// states, log-probs and entropy.
static inline void check_modes_inference(case_data *cd, decoder_model *m, const run_out *o_none) {
    const int64_t T = cd->T, H = cd->cfg.hidden_size;
    const char *nm = cd->name;
    char what[200];
    for (int mode = CKPT_SELECTIVE; mode <= CKPT_FULL; mode++) {
        run_out o;
        run_model(cd, m, (ckpt_mode)mode, 1, &o);
        // the recompute runs the same kernels on the same inputs
        snprintf(what, sizeof what, "%s %s logp == none", nm, decoder_ckpt_name((ckpt_mode)mode));
        tl_check_close(what, o.logp, o_none->logp, T, 1e-6);
        snprintf(what, sizeof what, "%s %s grads == none", nm, decoder_ckpt_name((ckpt_mode)mode));
        tl_check_close(what, o.g.data, o_none->g.data, cd->pl.numel, 1e-6);
        run_free(&o);
    }
    float *logp = malloc((size_t)T * 4), *ent = malloc((size_t)T * 4), *hid = malloc((size_t)(T * H) * 4);
    decoder_forward(m, NULL, &cd->b, hid);
    decoder_logprob(m, NULL, &cd->b, cd->targets, cd->temperature, logp, ent);
    snprintf(what, sizeof what, "%s inference hidden == training", nm);
    tl_check_close(what, hid, o_none->hidden, T * H, 1e-6);
    snprintf(what, sizeof what, "%s inference entropy == training", nm);
    tl_check_close(what, ent, o_none->ent, T, 1e-6);
    snprintf(what, sizeof what, "%s inference logp == training", nm);
    tl_check_close(what, logp, o_none->logp, T, 1e-6);
    free(logp); free(ent); free(hid);
}
