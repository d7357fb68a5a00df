// checkpoint.c: load/save HF model directories of every decoder family (tensor names from params.c).
#include "io/checkpoint.h"

#include <errno.h>
#include <math.h>

#include "core/common.h"
#include "core/hugepage.h"

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

// Index of the first non-finite value of x (n), or -1.
static int64_t first_nonfinite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

void checkpoint_load_weights(const char *dir, param_set *ps) { checkpoint_load_weights_ex(dir, ps, 0); }

void checkpoint_load_weights_ex(const char *dir, param_set *ps, int allow_nonfinite) {
    const param_layout *pl = ps->layout;
    st_dir d;
    st_dir_open(&d, dir);
    char a[128], b[128];
    // unexpected tensors first (cheap), then shapes and dtypes, then the copy
    for (int i = 0; i < d.n_tensors; i++) {
        const st_tensor *t = d.entries[i].t;
        if (param_layout_find(pl, t->name) >= 0) continue;
        if (pl->cfg.tie_word_embeddings && strcmp(t->name, "lm_head.weight") == 0) continue;  // tied: ignored
        rlc_die("%s: tensor '%s' is not a parameter of this %s config.json (unexpected tensor%s)",
                d.files[d.entries[i].file].path, t->name, pl->cfg.model_type,
                strstr(t->name, ".bias") ? "; the config asks for no such bias" : "");
    }
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        const char *path = NULL;
        const st_tensor *t = st_dir_find(&d, p->name, &path);
        shape_str(a, sizeof a, p->ndim, p->shape);
        if (!t) rlc_die("%s: tensor '%s' is missing (expected shape %s from the %s config.json)", dir, p->name, a, pl->cfg.model_type);
        if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F64)
            rlc_die("%s: tensor '%s' has dtype %s; expected F32, BF16 or F16", path, p->name, st_dtype_name(t->dtype));
        int same = t->ndim == p->ndim;
        for (int k = 0; same && k < p->ndim; k++) same = t->shape[k] == p->shape[k];
        if (!same) {
            shape_str(b, sizeof b, t->ndim, t->shape);
            rlc_die("%s: tensor '%s' has shape %s; expected %s from config.json", path, p->name, b, a);
        }
    }
    int warned = 0;
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        const char *path = NULL;
        const st_tensor *t = st_dir_find(&d, p->name, &path);
        st_tensor_to_f32(t, ps->data + p->offset, path);
        st_tensor_drop_pages(t);   // keeps peak RSS near the fp32 parameters alone
        // after the conversion: an F64 1e300 or an F16 inf is non-finite only as fp32
        const int64_t bad = first_nonfinite(ps->data + p->offset, p->numel);
        if (bad >= 0 && !allow_nonfinite)
            rlc_die("%s: tensor '%s' element %lld is %g as fp32; a checkpoint must hold finite weights "
                    "(--allow-nonfinite loads it anyway, for forensics)", path, p->name, (long long)bad,
                    (double)ps->data[p->offset + bad]);
        if (bad >= 0 && !warned++)
            rlc_warn("%s: tensor '%s' element %lld is %g as fp32 (loaded: --allow-nonfinite)", path, p->name,
                     (long long)bad, (double)ps->data[p->offset + bad]);
    }
    st_dir_close(&d);
}

void checkpoint_load(const char *dir, model_config *cfg, param_layout *pl, param_set *ps) {
    checkpoint_load_ex(dir, cfg, pl, ps, 0);
}

void checkpoint_load_ex(const char *dir, model_config *cfg, param_layout *pl, param_set *ps, int allow_nonfinite) {
    model_config_load(cfg, dir);
    param_layout_init(pl, cfg);
    char what[96];
    snprintf(what, sizeof what, "%s: the model's %lld fp32 parameters", dir, (long long)pl->numel);
    rlc_check_memory((double)pl->numel * sizeof(float), what);
    // every element is written by the load (or it dies), so skip param_set_init's zeroing pass
    ps->layout = pl;
    ps->data = rlc_alloc_huge((size_t)pl->numel * sizeof(float));
    checkpoint_load_weights_ex(dir, ps, allow_nonfinite);
}

static void save_impl(const char *dir, const param_layout *pl, const float *data, st_dtype dtype, st_fill_fn fill, void *ctx) {
    CHECK(dtype == ST_F32 || dtype == ST_BF16 || dtype == ST_F16, "checkpoint dtype %s", st_dtype_name(dtype));
    rlc_mkdirs(dir);
    st_write_tensor *wt = rlc_calloc((size_t)pl->n_tensors, sizeof(st_write_tensor));
    for (int i = 0; i < pl->n_tensors; i++) {
        const param_tensor *p = &pl->tensors[i];
        wt[i].name = p->name;
        wt[i].dtype = dtype;
        wt[i].ndim = p->ndim;
        for (int k = 0; k < p->ndim; k++) wt[i].shape[k] = p->shape[k];
        if (data) wt[i].f32 = data + p->offset;
        wt[i].fill = fill;
        wt[i].ctx = ctx;
    }
    const char *meta[] = {"format", "pt"};
    char *path = rlc_path_join(dir, "model.safetensors");
    st_write(path, wt, pl->n_tensors, meta, 1);
    free(path);
    free(wt);

    model_config cfg = pl->cfg;
    snprintf(cfg.torch_dtype, sizeof cfg.torch_dtype, "%s",
             dtype == ST_BF16 ? "bfloat16" : dtype == ST_F16 ? "float16" : "float32");
    char *json = model_config_to_json(&cfg);
    path = rlc_path_join(dir, "config.json");
    if (rlc_write_file_atomic(path, json, strlen(json)) != 0) rlc_die("%s: cannot write: %s", path, strerror(errno));
    free(path);
    free(json);
}

void checkpoint_save(const char *dir, const param_set *ps, st_dtype dtype) {
    save_impl(dir, ps->layout, ps->data, dtype, NULL, NULL);
}

void checkpoint_save_generated(const char *dir, const param_layout *pl, st_dtype dtype, st_fill_fn fill, void *ctx) {
    CHECK(fill != NULL, "checkpoint_save_generated needs a generator");
    save_impl(dir, pl, NULL, dtype, fill, ctx);
}

int checkpoint_copy_tokenizer(const char *src_dir, const char *dst_dir) {
    static const char *const FILES[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                        "vocab.json", "merges.txt", "special_tokens_map.json"};
    int copied = 0;
    rlc_mkdirs(dst_dir);
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        char *src = rlc_path_join(src_dir, FILES[i]);
        if (rlc_file_exists(src)) {
            size_t len;
            char *buf = rlc_read_file(src, &len);
            char *dst = rlc_path_join(dst_dir, FILES[i]);
            if (rlc_write_file_atomic(dst, buf, len) != 0) rlc_die("%s: cannot write: %s", dst, strerror(errno));
            free(dst);
            free(buf);
            copied++;
        }
        free(src);
    }
    return copied;
}
