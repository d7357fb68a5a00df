// decoder_head.c: the decoder's output head over the final-normed hidden states: per-token log-probs and entropy
// at a temperature (decoder_logprob) and their backward into d(hidden) and d(lm_head), without ever building
// (T, V) logits. With a frozen base the training forward also saves the head's per-token gradients, so the
// backward makes no pass over the vocabulary.
#include <math.h>

#include "core/common.h"
#include "model/decoder_internal.h"

// The head's forward over T rows: the frozen head's (saving g, ge) when g is given, else the plain one.
static void head_fwd(const decoder_model *m, float *logp, float *entropy, float *lse, float *g, float *ge, const float *hid,
                     const int32_t *targets, int64_t T, float temperature) {
    const dims d = dims_of(m->cfg);
    if (g)
        logprob_head_forward_frozen(logp, entropy, lse, g, ge, hid, decoder_lm_head(m), targets, T, d.H, d.V, temperature,
                                    m->cfg->final_logit_softcapping);
    else
        logprob_head_forward_cap(logp, entropy, lse, hid, decoder_lm_head(m), targets, T, d.H, d.V, temperature,
                                 m->cfg->final_logit_softcapping);
}

// The head's backward over a's T rows: d(hidden) into a->dhid (zeroed here), d(lm_head) into g_head (NULL: frozen).
// A frozen head whose forward saved g applies it; an entropy gradient the forward saved no ge for goes through
// the recomputing backward (dlogp's part stays with g). A trained head always takes the recomputing backward.
void dec_head_bwd(const decoder_model *m, decoder_acts *a, float *g_head, const float *dlogp, const float *dentropy,
                     const int32_t *targets, int64_t T, float temperature) {
    const dims d = dims_of(m->cfg);
    zero_par(a->dhid, T * d.H);
    if (!g_head && a->have_g) {
        int ent = 0;
        if (dentropy && !a->have_ge)
            for (int64_t t = 0; t < T && !ent; t++) ent = dentropy[t] != 0.0f;
        logprob_head_backward_frozen(a->dhid, dlogp, a->have_ge ? dentropy : NULL, a->head_g, a->have_ge ? a->head_ge : NULL,
                                     T, d.H);
        if (ent)
            logprob_head_backward_cap(a->dhid, NULL, NULL, dentropy, a->have_ent ? a->head_ent : NULL, a->hidden,
                                      decoder_lm_head(m), targets, a->head_lse, T, d.H, d.V, temperature,
                                      m->cfg->final_logit_softcapping);
        return;
    }
    logprob_head_backward_cap(a->dhid, g_head, dlogp, dentropy, a->have_ent ? a->head_ent : NULL, a->hidden, decoder_lm_head(m),
                              targets, a->head_lse, T, d.H, d.V, temperature, m->cfg->final_logit_softcapping);
}

void decoder_logprob(decoder_model *m, decoder_acts *a, const decoder_batch *b, const int32_t *targets, float temperature,
                   float *logp, float *entropy) {
    dims d = dims_of(m->cfg);
    CHECK(temperature > 0 && isfinite(temperature), "temperature=%g", temperature);
    const float *hid;
    float *lse = NULL;
    if (a) {
        CHECK(a->have_forward && a->T == b->T, "decoder_logprob needs decoder_forward on the same batch first");
        hid = a->hidden;
        lse = a->head_lse;
    } else {
        CHECK(m->ws->hidden_T == b->T, "decoder_logprob needs decoder_forward(m, NULL, ...) on the same batch first");
        hid = m->ws->hidden;
    }
    for (int64_t t = 0; t < b->T; t++)
        CHECK(targets[t] < d.V, "target %d at %lld outside vocab [0, %lld)", targets[t], (long long)t, (long long)d.V);
    // A training forward (acts) of a frozen head also saves d logp / d hidden (and d entropy / d hidden when the
    // entropy is computed): the backward is then one multiply-add per token. Inference (a NULL) pays nothing.
    float *g = NULL, *ge = NULL;
    if (a && m->base_frozen) {
        g = dec_acts_head_buf(a, &a->head_g);
        ge = entropy ? dec_acts_head_buf(a, &a->head_ge) : NULL;
    }
    int np = 0;
    int *st = dec_split_plan(m, b, 0, &np);
    if (st) {   // one head call per part, each on its own thread
#pragma omp parallel for schedule(static, 1) num_threads(np)
        for (int k = 0; k < np; k++) {
            const int64_t r0 = b->cu_seqlens[st[k]], n = b->cu_seqlens[st[k + 1]] - r0;
            head_fwd(m, logp + r0, entropy ? entropy + r0 : NULL, lse ? lse + r0 : NULL, g ? g + r0 * d.H : NULL,
                     ge ? ge + r0 * d.H : NULL, hid + r0 * d.H, targets + r0, n, temperature);
        }
        free(st);
    } else {
        head_fwd(m, logp, entropy, lse, g, ge, hid, targets, b->T, temperature);
    }
    if (a) {
        a->have_g = g != NULL;
        a->have_ge = ge != NULL;
        a->have_head = 1;
        a->have_ent = entropy != NULL;
        if (entropy) copy_par(a->head_ent, entropy, b->T);
        a->head_temperature = temperature;
    }
}
