// lora.c: the adapter size table, target resolution with PEFT's matching rules, PEFT's init and the merge product.
#include "model/lora.h"

#include <math.h>
#include <regex.h>
#include <string.h>

#include "backend/backend.h"
#include "core/common.h"
#include "core/rng.h"

const char *const LORA_PROJ_NAME[LORA_NPROJ] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
const char *const LORA_PROJ_PATH[LORA_NPROJ] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                                "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
const lora_keys LORA_KEYS_VERL = {"actor_rollout_ref.model.lora_rank", "actor_rollout_ref.model.lora_alpha",
                                  "actor_rollout_ref.model.target_modules"};

void lora_config_default(lora_config *lc) {
    memset(lc, 0, sizeof *lc);
    lc->rank = 8;
    lc->alpha = 16.0f;
}

int lora_match_list(lora_match *m, const char *csv, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->set = 1;
    const char *p = csv;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && (*p == ' ' || *p == '\t')) { p++; n--; }
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
        if (n == 0) { snprintf(err, errlen, "expected a comma-separated list of module names, got an empty entry in '%s'", csv); return -1; }
        if (m->n_names == LORA_MAX_NAMES) { snprintf(err, errlen, "more than %d module names", LORA_MAX_NAMES); return -1; }
        if (n >= sizeof m->names[0]) { snprintf(err, errlen, "module name '%.*s' longer than %zu characters", (int)n, p, sizeof m->names[0] - 1); return -1; }
        memcpy(m->names[m->n_names], p, n);
        m->names[m->n_names++][n] = 0;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int lora_match_string(lora_match *m, const char *s, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->set = 1;
    if (strcmp(s, "all-linear") == 0) {
        m->n_names = 1;
        snprintf(m->names[0], sizeof m->names[0], "all-linear");
        return 0;
    }
    if (strlen(s) >= sizeof m->regex) { snprintf(err, errlen, "regex longer than %zu characters", sizeof m->regex - 1); return -1; }
    regex_t re;
    char anchored[sizeof m->regex + 8];
    snprintf(anchored, sizeof anchored, "^(%s)$", s);
    if (regcomp(&re, s, REG_EXTENDED) != 0 || (regfree(&re), regcomp(&re, anchored, REG_EXTENDED)) != 0) {
        snprintf(err, errlen, "'%s' is not a valid regex", s);
        return -1;
    }
    regfree(&re);
    m->is_regex = 1;
    snprintf(m->regex, sizeof m->regex, "%s", s);
    return 0;
}

static int name_is_projection(const char *name) {
    for (int p = 0; p < LORA_NPROJ; p++) {
        size_t n = strlen(name), k = strlen(LORA_PROJ_PATH[p]);
        if (n > k && strcmp(name + n - k, LORA_PROJ_PATH[p]) == 0 && name[n - k - 1] == '.') return 1;
    }
    return 0;
}

int lora_match_module(const lora_match *m, const char *name) {
    if (!m->set) return 0;
    if (m->is_regex) {   // re.fullmatch: the pattern anchored at both ends
        char anchored[sizeof m->regex + 8];
        snprintf(anchored, sizeof anchored, "^(%s)$", m->regex);
        regex_t re;
        if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) != 0) return 0;
        int ok = regexec(&re, name, 0, NULL, 0) == 0;
        regfree(&re);
        return ok;
    }
    size_t n = strlen(name);
    for (int i = 0; i < m->n_names; i++) {
        const char *t = m->names[i];
        if (strcmp(t, "all-linear") == 0) {
            if (name_is_projection(name)) return 1;
            continue;
        }
        size_t k = strlen(t);
        if (strcmp(name, t) == 0) return 1;
        if (n > k && strcmp(name + n - k, t) == 0 && name[n - k - 1] == '.') return 1;
    }
    return 0;
}

float lora_scale(int rank, float alpha, int use_rslora) {
    return use_rslora ? (float)((double)alpha / sqrt((double)rank)) : (float)((double)alpha / (double)rank);
}

static void proj_dims(const model_config *c, int64_t in[LORA_NPROJ], int64_t out[LORA_NPROJ]) {
    const int64_t H = c->hidden_size, I = c->intermediate_size, QD = (int64_t)c->num_attention_heads * c->head_dim,
                  KD = (int64_t)c->num_key_value_heads * c->head_dim;
    const int64_t ins[LORA_NPROJ] = {H, H, H, QD, H, H, I}, outs[LORA_NPROJ] = {QD, KD, KD, H, I, I, H};
    memcpy(in, ins, sizeof ins);
    memcpy(out, outs, sizeof outs);
}

static int64_t base_param_count(const model_config *cfg) {
    param_layout pl;
    param_layout_init(&pl, cfg);
    int64_t n = pl.numel;
    param_layout_free(&pl);
    return n;
}

void lora_layout_init_mask(lora_layout *ll, const model_config *cfg, int rank, float alpha, int use_rslora,
                           const uint8_t *adapted) {
    CHECK(rank >= 1 && alpha > 0, "rank %d alpha %g", rank, alpha);
    memset(ll, 0, sizeof *ll);
    param_layout *pl = &ll->pl;
    pl->cfg = *cfg;
    ll->rank = rank;
    ll->alpha = alpha;
    ll->use_rslora = use_rslora;
    ll->scale = lora_scale(rank, alpha, use_rslora);
    ll->L = cfg->num_hidden_layers;
    ll->base_numel = base_param_count(cfg);
    proj_dims(cfg, ll->in, ll->out);
    const int L = ll->L;
    ll->a_off = rlc_alloc((size_t)L * LORA_NPROJ * sizeof(int64_t));
    ll->b_off = rlc_alloc((size_t)L * LORA_NPROJ * sizeof(int64_t));
    pl->n_blocks = L;
    pl->block_off = rlc_calloc((size_t)L + 1, sizeof(int64_t));
    for (int k = 0; k < LW_COUNT; k++) pl->layer_off[k] = -1;   // blocks differ per layer: no common layer view
    int n_ad = 0;
    for (int i = 0; i < L * LORA_NPROJ; i++) n_ad += adapted[i] != 0;
    pl->tensors = rlc_calloc((size_t)(2 * n_ad > 0 ? 2 * n_ad : 1), sizeof(param_tensor));
    int64_t off = 0;
    for (int l = 0; l < L; l++) {
        pl->block_off[l] = off;
        for (int p = 0; p < LORA_NPROJ; p++) {
            int i = l * LORA_NPROJ + p;
            ll->a_off[i] = ll->b_off[i] = -1;
            if (!adapted[i]) continue;
            ll->proj_mask |= 1u << p;
            for (int ab = 0; ab < 2; ab++) {
                param_tensor *t = &pl->tensors[pl->n_tensors++];
                snprintf(t->name, sizeof t->name, "base_model.model.model.layers.%d.%s.lora_%c.weight", l, LORA_PROJ_PATH[p],
                         ab ? 'B' : 'A');
                t->ndim = 2;
                t->shape[0] = ab ? ll->out[p] : rank;   // A (r, in), B (out, r)
                t->shape[1] = ab ? rank : ll->in[p];
                t->numel = t->shape[0] * t->shape[1];
                t->offset = off;
                t->block = l;
                t->decay = 1;
                (ab ? ll->b_off : ll->a_off)[i] = off;
                off += t->numel;
            }
        }
    }
    pl->block_off[L] = off;
    pl->numel = off;
}

void lora_layout_init(lora_layout *ll, const model_config *cfg, const lora_config *lc, const lora_keys *keys) {
    if (!keys) keys = &LORA_KEYS_VERL;
    if (lc->rank < 1) rlc_die("%s: expected an integer >= 1 (0 turns LoRA off), got %d", keys->rank, lc->rank);
    if (!(lc->alpha > 0) || !isfinite(lc->alpha)) rlc_die("%s: expected a number > 0, got %g", keys->alpha, (double)lc->alpha);
    float s = lora_scale(lc->rank, lc->alpha, lc->use_rslora);
    if (!isfinite(s) || s == 0.0f)
        rlc_die("%s: the scale alpha/%s = %g/%d is not a finite non-zero fp32 number", keys->alpha, lc->use_rslora ? "sqrt(r)" : "r",
                (double)lc->alpha, lc->rank);
    const int L = cfg->num_hidden_layers;
    uint8_t *mask = rlc_calloc((size_t)L * LORA_NPROJ, 1);
    lora_match all;
    char err[256];
    lora_match_string(&all, "all-linear", err, sizeof err);
    const lora_match *tgt = lc->target.set ? &lc->target : &all;
    int n = 0;
    char name[128];
    for (int l = 0; l < L; l++)
        for (int p = 0; p < LORA_NPROJ; p++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", l, LORA_PROJ_PATH[p]);
            if (!lora_match_module(tgt, name) || lora_match_module(&lc->exclude, name)) continue;
            mask[l * LORA_NPROJ + p] = 1;
            n++;
        }
    if (tgt->n_names > 0 && !tgt->is_regex) {   // every list entry must select something (PEFT errors on none)
        for (int i = 0; i < tgt->n_names; i++) {
            lora_match one = *tgt;
            one.n_names = 1;
            memcpy(one.names[0], tgt->names[i], sizeof one.names[0]);
            int hit = 0;
            for (int l = 0; l < L && !hit; l++)
                for (int p = 0; p < LORA_NPROJ && !hit; p++) {
                    snprintf(name, sizeof name, "model.layers.%d.%s", l, LORA_PROJ_PATH[p]);
                    hit = lora_match_module(&one, name);
                }
            if (!hit)
                rlc_die("%s: '%s' matches no module (LoRA adapts q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj "
                        "of model.layers.N.{self_attn,mlp}; lm_head and embed_tokens are not supported)",
                        keys->target, tgt->names[i]);
        }
    }
    if (n == 0) {
        free(mask);
        if (tgt->is_regex)
            rlc_die("%s: the regex '%s' matches no module (it must match a whole name such as model.layers.0.self_attn.q_proj)",
                    keys->target, tgt->regex);
        rlc_die("%s: after exclude_modules no module is left to adapt", keys->target);
    }
    lora_layout_init_mask(ll, cfg, lc->rank, lc->alpha, lc->use_rslora, mask);
    free(mask);
}

void lora_layout_free(lora_layout *ll) {
    free(ll->a_off);
    free(ll->b_off);
    param_layout_free(&ll->pl);
    memset(ll, 0, sizeof *ll);
}

void lora_init_weights(const lora_layout *ll, param_set *ad, uint64_t seed) {
    CHECK(ad->layout == &ll->pl, "adapter set built on another layout");
    for (int i = 0; i < ll->pl.n_tensors; i++) {
        const param_tensor *t = &ll->pl.tensors[i];
        float *x = ad->data + t->offset;
        if (strstr(t->name, ".lora_B.")) {
            memset(x, 0, (size_t)t->numel * sizeof(float));
            continue;
        }
        // kaiming_uniform_(a=√5) on A (r, in): bound = sqrt(6 / ((1 + 5) * in)) = 1/√in
        const double bound = 1.0 / sqrt((double)t->shape[1]);
        rng r;
        rng_stream(&r, seed, 0x4C6F5241u /* "LoRA" */, (uint64_t)i);
        for (int64_t j = 0; j < t->numel; j++) x[j] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
    }
}

int64_t lora_trainable_count(const lora_layout *ll) { return ll->pl.numel; }

static void human(char *b, size_t n, int64_t x) {
    if (x >= 1000000000) snprintf(b, n, "%.2fB", (double)x / 1e9);
    else if (x >= 1000000) snprintf(b, n, "%.1fM", (double)x / 1e6);
    else if (x >= 1000) snprintf(b, n, "%.1fK", (double)x / 1e3);
    else snprintf(b, n, "%lld", (long long)x);
}

void lora_trainable_line(const lora_layout *ll, char *buf, size_t len) {
    char a[32], b[32];
    human(a, sizeof a, ll->pl.numel);
    human(b, sizeof b, ll->base_numel);
    snprintf(buf, len, "trainable %s / %s (%.2f%%)", a, b, 100.0 * (double)ll->pl.numel / (double)(ll->base_numel ? ll->base_numel : 1));
}

float *lora_base_weight(const layer_weights *lw, int proj) {
    switch (proj) {
    case LORA_Q: return lw->wq;
    case LORA_K: return lw->wk;
    case LORA_V: return lw->wv;
    case LORA_O: return lw->wo;
    case LORA_GATE: return lw->w_gate;
    case LORA_UP: return lw->w_up;
    default: return lw->w_down;
    }
}

void lora_merge_into(const lora_layout *ll, const float *ad, int layer, int proj, float *w) {
    const int64_t i = (int64_t)layer * LORA_NPROJ + proj;
    if (ll->a_off[i] < 0) return;
    // W (out, in) += s · B (out, r) · A (r, in)
    backend_sgemm(0, 0, ll->out[proj], ll->in[proj], ll->rank, ll->scale, ad + ll->b_off[i], ll->rank, ad + ll->a_off[i],
                  ll->in[proj], 1.0f, w, ll->in[proj]);
}

void lora_merge_into_ref(const lora_layout *ll, const float *ad, int layer, int proj, float *w) {
    const int64_t i = (int64_t)layer * LORA_NPROJ + proj;
    if (ll->a_off[i] < 0) return;
    const float *A = ad + ll->a_off[i], *B = ad + ll->b_off[i];
    const int64_t in = ll->in[proj], out = ll->out[proj], r = ll->rank;
    for (int64_t o = 0; o < out; o++)
        for (int64_t c = 0; c < in; c++) {
            double acc = 0;
            for (int64_t k = 0; k < r; k++) acc += (double)B[o * r + k] * (double)A[k * in + c];
            w[o * in + c] += (float)((double)ll->scale * acc);
        }
}
