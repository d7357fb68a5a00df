// reward.c: reward dispatch (see reward.h).
#include "reward/reward.h"

#include <string.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "reward/gsm8k.h"

void rlc_reward_init(rlc_reward_fn *r, const char *command, double timeout_s) {
    memset(r, 0, sizeof *r);
    if (command && *command) {
        rlc_reward_ext_start(&r->ext, command, timeout_s);
        r->has_ext = 1;
    }
}

void rlc_reward_free(rlc_reward_fn *r) {
    if (r->has_ext) rlc_reward_ext_stop(&r->ext);
    memset(r, 0, sizeof *r);
}

int rlc_reward_has_builtin(const char *data_source) { return data_source && !strcmp(data_source, "openai/gsm8k"); }

static void add_acc(rlc_reward_result *o) {
    for (int i = 0; i < o->n_extra; i++)
        if (!strcmp(o->extra_keys[i], "acc")) return;
    o->extra_keys = rlc_realloc(o->extra_keys, (size_t)(o->n_extra + 1) * sizeof(char *));
    o->extra_vals = rlc_realloc(o->extra_vals, (size_t)(o->n_extra + 1) * sizeof(double));
    o->extra_keys[o->n_extra] = rlc_strdup("acc");
    o->extra_vals[o->n_extra++] = o->score;
}

void rlc_reward_compute(rlc_reward_fn *r, int64_t n, const rlc_reward_request *req, rlc_reward_result *out) {
    if (r->has_ext) {
        rlc_reward_ext_score(&r->ext, n, req, out);
        for (int64_t i = 0; i < n; i++) add_acc(&out[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!rlc_reward_has_builtin(req[i].data_source))
            rlc_die("reward: no built-in reward function for data_source '%s' (sample %lld); set "
                    "custom_reward_function.command to score it",
                    req[i].data_source ? req[i].data_source : "(null)", (long long)i);
        memset(&out[i], 0, sizeof out[i]);
        const char *resp = req[i].response;
        out[i].score = gsm8k_compute_score(resp, req[i].ground_truth ? req[i].ground_truth : "", GSM8K_STRICT, 0.0, 1.0);
        char *a = gsm8k_extract(resp, strlen(resp), GSM8K_STRICT);
        out[i].pred = a ? a : rlc_strdup("");
        add_acc(&out[i]);
    }
}

void rlc_reward_token_scores(float *token_scores, const float *score, const int64_t *resp_len, int64_t B, int64_t T) {
    memset(token_scores, 0, (size_t)(B * T) * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        CHECK(resp_len[b] >= 0 && resp_len[b] <= T, "response length %lld of width %lld", (long long)resp_len[b],
              (long long)T);
        int64_t t = resp_len[b] > 0 ? resp_len[b] - 1 : T - 1;
        if (T > 0) token_scores[b * T + t] = score[b];
    }
}

// The adapter (no single quotes inside: it is passed as one single-quoted shell word).
static const char k_adapter[] =
    "import importlib.util, json, math, sys\n"
    "spec = importlib.util.spec_from_file_location(\"rlc_user_reward\", sys.argv[1])\n"
    "mod = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(mod)\n"
    "fn = getattr(mod, sys.argv[2])\n"
    "for line in sys.stdin:\n"
    "    req = json.loads(line)\n"
    "    r = fn(req[\"data_source\"], req[\"response\"], req[\"ground_truth\"], req.get(\"extra_info\") or {})\n"
    "    out = {\"id\": req[\"id\"]}\n"
    "    if isinstance(r, dict):\n"
    "        out[\"score\"] = float(r[\"score\"])\n"
    "        for k, v in r.items():\n"
    "            if k == \"pred\" and isinstance(v, str):\n"
    "                out[k] = v\n"
    "            elif k != \"score\" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):\n"
    "                out[k] = float(v)\n"
    "    else:\n"
    "        out[\"score\"] = float(r)\n"
    "    sys.stdout.write(json.dumps(out) + \"\\n\")\n"
    "    sys.stdout.flush()\n";

static void sh_quote(rlc_strbuf *b, const char *s) {
    rlc_sb_putc(b, '\'');
    for (const char *p = s; *p; p++) {
        if (*p == '\'') rlc_sb_puts(b, "'\\''");
        else rlc_sb_putc(b, *p);
    }
    rlc_sb_putc(b, '\'');
}

char *rlc_reward_python_command(const char *python, const char *path, const char *name) {
    rlc_strbuf b = {0};
    sh_quote(&b, python && *python ? python : "python3");
    rlc_sb_puts(&b, " -c ");
    sh_quote(&b, k_adapter);
    rlc_sb_putc(&b, ' ');
    sh_quote(&b, path);
    rlc_sb_putc(&b, ' ');
    sh_quote(&b, name && *name ? name : "compute_score");
    return rlc_sb_take(&b);
}
