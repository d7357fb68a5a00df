// env_calculator.c: the calculator environment (see env_calculator.h).
#include "rollout/env_calculator.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "reward/gsm8k.h"
#include "rollout/agent.h"

// ---- exact rationals: n / d, d > 0, reduced, both within int64 ----
typedef struct { int64_t n, d; } rat;

static __int128 gcd128(__int128 a, __int128 b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        __int128 t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// n / d reduced into r; -1 if it does not fit 64-bit integers.
static int make(__int128 n, __int128 d, rat *r) {
    if (d < 0) n = -n, d = -d;
    const __int128 g = gcd128(n, d);
    if (g > 1) n /= g, d /= g;
    if (n > INT64_MAX || n < -INT64_MAX || d > INT64_MAX) return -1;
    *r = (rat){(int64_t)n, (int64_t)d};
    return 0;
}

typedef struct {
    const char *s;
    size_t i;
    int depth;
    const char *err;   // first error (static text)
} parser;

static void skip(parser *p) {
    while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r') p->i++;
}

static int fail(parser *p, const char *e) {
    if (!p->err) p->err = e;
    return -1;
}

static int expr(parser *p, rat *r);

static int number(parser *p, rat *r) {
    __int128 n = 0, d = 1;
    int digits = 0;
    while (p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        n = n * 10 + (p->s[p->i++] - '0');
        digits++;
        if (n > INT64_MAX) return fail(p, "a number is too large (exact arithmetic holds 64-bit fractions)");
    }
    if (p->s[p->i] == '.') {
        p->i++;
        while (p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            n = n * 10 + (p->s[p->i++] - '0');
            d *= 10;
            digits++;
            if (n > INT64_MAX || d > INT64_MAX) return fail(p, "a number has too many digits (exact arithmetic holds 64-bit fractions)");
        }
    }
    if (!digits) return fail(p, "expected a number or '('");
    return make(n, d, r) ? fail(p, "a number is too large") : 0;
}

static int unary(parser *p, rat *r);

static int primary(parser *p, rat *r) {
    skip(p);
    if (p->s[p->i] == '(') {
        if (++p->depth > 64) return fail(p, "parentheses nested too deeply");
        p->i++;
        if (expr(p, r)) return -1;
        skip(p);
        if (p->s[p->i] != ')') return fail(p, "expected ')'");
        p->i++;
        p->depth--;
        return 0;
    }
    return number(p, r);
}

// power := primary [('^' | '**') unary], right-associative; integer exponents only
static int power(parser *p, rat *r) {
    if (primary(p, r)) return -1;
    skip(p);
    int is_pow = p->s[p->i] == '^' || (p->s[p->i] == '*' && p->s[p->i + 1] == '*');
    if (!is_pow) return 0;
    p->i += p->s[p->i] == '^' ? 1 : 2;
    rat e;
    if (unary(p, &e)) return -1;
    if (e.d != 1) return fail(p, "only integer exponents are exact");
    if (e.n > 4096 || e.n < -4096) return fail(p, "an exponent is too large");
    if (e.n < 0 && r->n == 0) return fail(p, "division by zero");
    rat base = e.n < 0 ? (rat){r->d, r->n} : *r, acc = {1, 1};
    if (base.d < 0) base.n = -base.n, base.d = -base.d;
    for (int64_t k = 0; k < (e.n < 0 ? -e.n : e.n); k++)
        if (make((__int128)acc.n * base.n, (__int128)acc.d * base.d, &acc)) return fail(p, "a result is too large (exact arithmetic holds 64-bit fractions)");
    *r = acc;
    return 0;
}

static int unary(parser *p, rat *r) {
    skip(p);
    if (p->s[p->i] == '-' || p->s[p->i] == '+') {
        const int neg = p->s[p->i++] == '-';
        if (++p->depth > 256) return fail(p, "too many signs");
        if (unary(p, r)) return -1;
        p->depth--;
        if (neg) r->n = -r->n;
        return 0;
    }
    return power(p, r);
}

static int term(parser *p, rat *r) {
    if (unary(p, r)) return -1;
    for (;;) {
        skip(p);
        const char op = p->s[p->i];
        if (!(op == '*' || op == '/') || (op == '*' && p->s[p->i + 1] == '*')) return 0;
        p->i++;
        rat b;
        if (unary(p, &b)) return -1;
        if (op == '/' && b.n == 0) return fail(p, "division by zero");
        const __int128 n = op == '*' ? (__int128)r->n * b.n : (__int128)r->n * b.d;
        const __int128 d = op == '*' ? (__int128)r->d * b.d : (__int128)r->d * b.n;
        if (make(n, d, r)) return fail(p, "a result is too large (exact arithmetic holds 64-bit fractions)");
    }
}

static int expr(parser *p, rat *r) {
    if (term(p, r)) return -1;
    for (;;) {
        skip(p);
        const char op = p->s[p->i];
        if (op != '+' && op != '-') return 0;
        p->i++;
        rat b;
        if (term(p, &b)) return -1;
        const __int128 n = (__int128)r->n * b.d + (op == '+' ? 1 : -1) * (__int128)b.n * r->d;
        if (make(n, (__int128)r->d * b.d, r)) return fail(p, "a result is too large (exact arithmetic holds 64-bit fractions)");
    }
}

int rlc_calc_eval(const char *src, rlc_strbuf *out) {
    if (strlen(src) > 4096) {
        rlc_sb_puts(out, "the expression is longer than 4096 characters");
        return -1;
    }
    parser p = {src, 0, 0, NULL};
    rat r = {0, 1};
    if (!expr(&p, &r)) {
        skip(&p);
        if (p.s[p.i]) fail(&p, "unexpected character");
    }
    if (p.err) {
        rlc_sb_printf(out, "%s at position %zu", p.err, p.i + 1);
        return -1;
    }
    // an exact decimal when the denominator is 2^a 5^b, else the reduced fraction
    int64_t d = r.d, k2 = 0, k5 = 0;
    while (d % 2 == 0) d /= 2, k2++;
    while (d % 5 == 0) d /= 5, k5++;
    const int64_t places = k2 > k5 ? k2 : k5;
    if (d != 1 || places > 18) {   // (past 18 places the decimal would not fit 128-bit scaling: the fraction is as exact)
        rlc_sb_printf(out, "%lld/%lld", (long long)r.n, (long long)r.d);
        return 0;
    }
    __int128 mul = 1;   // 10^places <= 10^18, and |n| * 10^places / d < 2^63 * 10^18 < 2^127
    for (int64_t i = 0; i < places; i++) mul *= 10;
    const __int128 scaled = (__int128)r.n * (mul / r.d);
    const int neg = scaled < 0;
    unsigned __int128 u = neg ? (unsigned __int128)(-scaled) : (unsigned __int128)scaled;
    char digits[64];
    int nd = 0;
    do {
        digits[nd++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    while (nd <= places) digits[nd++] = '0';
    if (neg) rlc_sb_putc(out, '-');
    for (int i = nd - 1; i >= 0; i--) {
        rlc_sb_putc(out, digits[i]);
        if (i == places && places > 0) rlc_sb_putc(out, '.');
    }
    return 0;
}

// ---- the environment ----

static const char CALC_TOOL[] =
    "{\"type\":\"function\",\"function\":{\"name\":\"calculator\",\"description\":\"Exact arithmetic: + - * / ^ and "
    "parentheses.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"expression\":{\"type\":\"string\"}},"
    "\"required\":[\"expression\"]}}}";
// verl's GSM8K tool schema (spec agent-loop.md §2.4)
static const char GSM8K_TOOL[] =
    "{\"type\":\"function\",\"function\":{\"name\":\"calc_gsm8k_reward\",\"description\":\"A tool for calculating the reward of "
    "gsm8k. (1.0 if parsed answer is correct, 0.0 if parsed answer is incorrect or not correctly parsed)\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"answer\":{\"type\":\"string\",\"description\":\"The model's answer to the GSM8K math problem, must "
    "be a digits\"}},\"required\":[\"answer\"]}}}";

const char *rlc_calc_tool_schema(void) { return CALC_TOOL; }

typedef struct {
    char *traj, *truth;
} truth_entry;

// Python's str() of a JSON value as verl's tool sees it (a string itself; numbers as Python prints them).
static void py_str(rlc_strbuf *b, const cJSON *v) {
    if (!v) return;
    if (cJSON_IsString(v)) rlc_sb_puts(b, v->valuestring);
    else if (cJSON_IsNumber(v)) {
        const double x = v->valuedouble;
        if (x == floor(x) && fabs(x) < 1e15) {   // JSON integers (a JSON 72.0 is indistinguishable here)
            rlc_sb_printf(b, "%.0f", x);
            return;
        }
        char t[64];
        for (int prec = 1; prec <= 17; prec++) {   // repr(float): the shortest text that reads back the same
            snprintf(t, sizeof t, "%.*g", prec, x);
            if (strtod(t, NULL) == x) break;
        }
        rlc_sb_puts(b, t);
        if (!strpbrk(t, ".eEn")) rlc_sb_puts(b, ".0");
    } else if (cJSON_IsTrue(v)) rlc_sb_puts(b, "True");
    else if (cJSON_IsFalse(v)) rlc_sb_puts(b, "False");
    else if (cJSON_IsNull(v)) rlc_sb_puts(b, "None");
    else {
        char *t = cJSON_PrintUnformatted(v);
        rlc_sb_puts(b, t);
        free(t);
    }
}

static void reply(FILE *out, cJSON *r) {
    char *t = cJSON_PrintUnformatted(r);
    fputs(t, out);
    fputc('\n', out);
    fflush(out);
    free(t);
    cJSON_Delete(r);
}

static int env_error(FILE *out, const char *traj, const char *msg) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "type", "error");
    if (traj) cJSON_AddStringToObject(r, "traj", traj);
    else cJSON_AddNullToObject(r, "traj");
    cJSON_AddStringToObject(r, "message", msg);
    reply(out, r);
    return 1;
}

int rlc_env_calculator_run(FILE *in, FILE *out, const rlc_calc_tools *tools) {
    truth_entry *tr = NULL;
    int ntr = 0, captr = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int status = 0;
    while (!status && (len = getline(&line, &cap, in)) >= 0) {
        cJSON *m = cJSON_ParseWithLength(line, (size_t)len);
        const cJSON *ty = m ? cJSON_GetObjectItemCaseSensitive(m, "type") : NULL;
        const cJSON *tj = m ? cJSON_GetObjectItemCaseSensitive(m, "traj") : NULL;
        const char *traj = cJSON_IsString(tj) ? tj->valuestring : NULL;
        if (!cJSON_IsString(ty)) {
            status = env_error(out, NULL, "calculator: a request is not a JSON object with a string \"type\"");
        } else if (!strcmp(ty->valuestring, "hello")) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "type", "hello");
            cJSON_AddStringToObject(r, "protocol", "rlc-env/1");
            cJSON *tl = cJSON_AddArrayToObject(r, "tools");
            if (tools->calculator) cJSON_AddItemToArray(tl, cJSON_Parse(CALC_TOOL));
            if (tools->gsm8k) cJSON_AddItemToArray(tl, cJSON_Parse(GSM8K_TOOL));
            reply(out, r);
        } else if (!traj) {
            status = env_error(out, NULL, "calculator: a request has no string \"traj\"");
        } else if (!strcmp(ty->valuestring, "start")) {
            const cJSON *gt = cJSON_GetObjectItemCaseSensitive(m, "ground_truth");
            if (ntr == captr) {
                captr = captr ? captr * 2 : 64;
                tr = rlc_realloc(tr, (size_t)captr * sizeof *tr);
            }
            tr[ntr++] = (truth_entry){rlc_strdup(traj), rlc_strdup(cJSON_IsString(gt) ? gt->valuestring : "")};
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "type", "started");
            cJSON_AddStringToObject(r, "traj", traj);
            reply(out, r);
        } else if (!strcmp(ty->valuestring, "step")) {
            int k = -1;
            for (int i = 0; i < ntr; i++)
                if (!strcmp(tr[i].traj, traj)) k = i;
            if (k < 0) {
                status = env_error(out, traj, "calculator: a step for a trajectory that was not started");
            } else {
                cJSON *r = cJSON_CreateObject();
                cJSON_AddStringToObject(r, "type", "observation");
                cJSON_AddStringToObject(r, "traj", traj);
                cJSON *res = cJSON_AddArrayToObject(r, "results");
                const cJSON *c;
                cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
                    const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
                    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(c, "name");
                    const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "arguments");
                    rlc_strbuf text = {0};
                    int is_error = 0;
                    if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "calculator")) {
                        const cJSON *e = cJSON_GetObjectItemCaseSensitive(args, "expression");
                        if (!cJSON_IsString(e)) {
                            rlc_sb_puts(&text, "Error: the argument \"expression\" must be a string");
                            is_error = 1;
                        } else if (rlc_calc_eval(e->valuestring, &text)) {
                            rlc_strbuf t2 = {0};
                            rlc_sb_printf(&t2, "Error: %s", text.s);
                            rlc_sb_free(&text);
                            text = t2;
                            is_error = 1;
                        }
                    } else {   // calc_gsm8k_reward, as verl's Gsm8kTool.execute
                        rlc_strbuf a = {0};
                        py_str(&a, cJSON_GetObjectItemCaseSensitive(args, "answer"));
                        rlc_strbuf resp = {0};
                        if (strncmp(a.s ? a.s : "", "#### ", 5)) rlc_sb_puts(&resp, "#### ");
                        rlc_sb_puts(&resp, a.s ? a.s : "");
                        const double rw = gsm8k_compute_score(resp.s, tr[k].truth, GSM8K_FLEXIBLE, 0.0, 1.0);
                        rlc_sb_puts(&text, "Current parsed answer=");
                        agent_py_repr(&text, a.s ? a.s : "");
                        rlc_sb_puts(&text, rw == 1.0 ? " reward=1.0" : " reward=0.0");
                        rlc_sb_free(&a);
                        rlc_sb_free(&resp);
                    }
                    cJSON *o = cJSON_CreateObject();
                    cJSON_AddItemToObject(o, "id", cJSON_Duplicate(id, 1));
                    cJSON_AddStringToObject(o, "content", text.s ? text.s : "");
                    cJSON_AddBoolToObject(o, "is_error", is_error);
                    cJSON_AddItemToArray(res, o);
                    rlc_sb_free(&text);
                }
                reply(out, r);
            }
        } else if (!strcmp(ty->valuestring, "finish")) {
            for (int i = 0; i < ntr; i++)
                if (!strcmp(tr[i].traj, traj)) {
                    free(tr[i].traj);
                    free(tr[i].truth);
                    tr[i] = tr[--ntr];
                    break;
                }
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "type", "finished");
            cJSON_AddStringToObject(r, "traj", traj);
            cJSON_AddNullToObject(r, "score");   // the trainer's reward path scores the trajectory
            reply(out, r);
        } else {
            status = env_error(out, traj, "calculator: unknown request type");
        }
        cJSON_Delete(m);
    }
    for (int i = 0; i < ntr; i++) {
        free(tr[i].traj);
        free(tr[i].truth);
    }
    free(tr);
    free(line);
    return status;
}
