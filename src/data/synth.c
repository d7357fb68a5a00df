// synth.c: synthetic GSM8K-format word problems (see synth.h).
#include "data/synth.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/strbuf.h"
#include "core/rng.h"

static const char *NAMES[] = {"Ava", "Ben", "Chloe", "Dan", "Emma", "Finn", "Grace", "Hugo", "Ivy", "Jack",
                              "Kira", "Leo", "Maya", "Noah", "Olga", "Paul", "Rosa", "Sam", "Tara", "Omar"};
static const char *ITEMS[] = {"apples", "marbles", "stickers", "books", "coins", "pencils", "cookies", "stamps",
                              "shells", "cards", "beads", "eggs", "toy cars", "candles", "flowers", "buttons"};
#define NITEMS (sizeof ITEMS / sizeof ITEMS[0])
#define NNAMES (sizeof NAMES / sizeof NAMES[0])

void synth_params_default(synth_params *p) {
    p->min_steps = 2;
    p->max_steps = 3;
    p->max_operand = 20;
    p->allow_mul_div = 1;
}

static long long pick(rng *r, long long lo, long long hi) { return lo + (long long)rng_below(r, (uint64_t)(hi - lo + 1)); }

// One line of the expression-form solution: the worked solution's sentence with the expression in place of
// the computed value ("Adding 8 gives 4 + 8 = <<4+8=12>>12." becomes "Adding 8 gives 4 + 8.").
static void step_sentence(rlc_strbuf *w, char op, long long y, const char *expr) {
    switch (op) {
    case '+': rlc_sb_printf(w, "Adding %lld gives %s.", y, expr); break;
    case '-': rlc_sb_printf(w, "Taking away %lld leaves %s.", y, expr); break;
    case '*': rlc_sb_printf(w, "%lld times as many is %s.", y, expr); break;
    default: rlc_sb_printf(w, "One share of %lld is %s.", y, expr); break;
    }
}

void synth_generate(synth_problem *out, const synth_params *p, uint64_t seed, uint64_t index) {
    CHECK(p->min_steps >= 1 && p->max_steps >= p->min_steps && p->max_steps <= 8, "steps %d..%d", p->min_steps, p->max_steps);
    CHECK(p->max_operand >= 2, "max_operand %d", p->max_operand);
    rng r;
    rng_stream(&r, seed, 0x53594e5448ull /* "SYNTH" */, index);
    const char *name = NAMES[rng_below(&r, NNAMES)];
    const char *item = ITEMS[rng_below(&r, NITEMS)];
    int steps = (int)pick(&r, p->min_steps, p->max_steps);
    long long x = pick(&r, 2, p->max_operand);
    rlc_strbuf q = {0}, a = {0}, e = {0}, w = {0};   // e: the expression so far; w: the worked text with expressions
    rlc_sb_printf(&q, "%s has %lld %s.", name, x, item);
    rlc_sb_printf(&a, "%s starts with %lld %s.\n", name, x, item);
    rlc_sb_printf(&e, "%lld", x);
    rlc_sb_printf(&w, "%s starts with %lld %s.", name, x, item);
    for (int s = 0; s < steps; s++) {
        int kind = (int)rng_below(&r, p->allow_mul_div ? 4 : 2);
        if (kind == 3 && (x < 2 || x > 200)) kind = 0;   // keep divisions meaningful and numbers small
        if (kind == 2 && x > 60) kind = 1;
        if (kind == 1 && x < 2) kind = 0;
        long long y, nx;
        char op = '+';   // the step's operator: its sentence in the expression-form solution (step_sentence)
        switch (kind) {
        case 0:  // add
            y = pick(&r, 1, p->max_operand);
            nx = x + y;
            if (rng_below(&r, 2)) rlc_sb_printf(&q, " Then %s buys %lld more.", name, y);
            else rlc_sb_printf(&q, " A friend gives %s %lld more.", name, y);
            rlc_sb_printf(&a, "Adding %lld gives %lld + %lld = <<%lld+%lld=%lld>>%lld.\n", y, x, y, x, y, nx, nx);
            break;
        case 1:  // subtract
            y = pick(&r, 1, x - 1 < p->max_operand ? x - 1 : p->max_operand);
            nx = x - y;
            if (rng_below(&r, 2)) rlc_sb_printf(&q, " Then %s gives away %lld.", name, y);
            else rlc_sb_printf(&q, " Then %s loses %lld.", name, y);
            rlc_sb_printf(&a, "Taking away %lld leaves %lld - %lld = <<%lld-%lld=%lld>>%lld.\n", y, x, y, x, y, nx, nx);
            op = '-';
            break;
        case 2:  // multiply
            y = pick(&r, 2, 4);
            nx = x * y;
            rlc_sb_printf(&q, " Then the number of %s becomes %lld times as many.", item, y);
            rlc_sb_printf(&a, "%lld times as many is %lld * %lld = <<%lld*%lld=%lld>>%lld.\n", y, x, y, x, y, nx, nx);
            op = '*';
            break;
        default: {  // divide evenly: choose a divisor of x in 2..6
            long long divs[8];
            int nd = 0;
            for (long long d = 2; d <= 6; d++)
                if (x % d == 0) divs[nd++] = d;
            if (nd == 0) {  // no small divisor: fall back to an addition
                y = pick(&r, 1, p->max_operand);
                nx = x + y;
                rlc_sb_printf(&q, " Then %s buys %lld more.", name, y);
                rlc_sb_printf(&a, "Adding %lld gives %lld + %lld = <<%lld+%lld=%lld>>%lld.\n", y, x, y, x, y, nx, nx);
                break;
            }
            y = divs[rng_below(&r, (uint64_t)nd)];
            nx = x / y;
            rlc_sb_printf(&q, " Then %s shares them equally among %lld friends and keeps one share.", name, y);
            rlc_sb_printf(&a, "One share of %lld is %lld / %lld = <<%lld/%lld=%lld>>%lld.\n", y, x, y, x, y, nx, nx);
            op = '/';
            break;
        }
        }
        // the expression so far, parenthesised from the second step on (no precedence to reason about), then
        // the step's sentence with it in place of the result
        if (s > 0) {
            rlc_strbuf pe = {0};
            rlc_sb_printf(&pe, "(%s)", e.s);
            rlc_sb_free(&e);
            e = pe;
        }
        rlc_sb_printf(&e, " %c %lld", op, y);
        rlc_sb_puts(&w, "\n");
        step_sentence(&w, op, y, e.s);
        x = nx;
    }
    rlc_sb_printf(&q, " How many %s does %s have now?", item, name);
    rlc_sb_printf(&a, "#### %lld", x);
    out->question = q.s;
    out->answer = a.s;
    out->expr = e.s;
    out->expr_work = w.s;
    out->result = x;
    out->steps = steps;
}

void synth_problem_free(synth_problem *pr) {
    free(pr->question);
    free(pr->answer);
    free(pr->expr);
    free(pr->expr_work);
    pr->question = pr->answer = pr->expr = pr->expr_work = NULL;
}

int synth_answer_only(uint64_t seed, uint64_t index, double frac) {
    if (frac <= 0) return 0;
    rng r;
    rng_stream(&r, seed, 0x414e534f4e4c59ull /* "ANSONLY" */, index);
    return rng_uniform(&r) < frac;
}

int synth_tool_call(uint64_t seed, uint64_t index, double frac) {
    if (frac <= 0) return 0;
    rng r;
    rng_stream(&r, seed, 0x544f4f4c43414c4cull /* "TOOLCALL" */, index);
    return rng_uniform(&r) < frac;
}
