// fuzz_trainer_state.c: the trainer's own state files of a checkpoint (src/trainer/trainer_state.h), parsed from
// the input bytes: global_step_N/trainer_state.bin ("RLCGRPO\x01") and critic/value_head_optimizer.bin
// ("RLCVHOPT", chosen when the input starts with that magic). A parsed state is checked for the ranges the parser
// promises.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "fuzz_common.h"
#include "trainer/optim.h"
#include "trainer/trainer_state.h"

static void body(const uint8_t *data, size_t n) {
    if (n >= 8 && !memcmp(data, "RLCVHOPT", 8)) {
        vhead_opt_state s;
        vhead_opt_parse(&s, data, n, "value_head_optimizer.bin");
        CHECK(s.n >= 1 && (size_t)s.n * 8 + VHEAD_OPT_HEADER == n && s.step >= 0 && s.step <= ADAMW_MAX_STEP,
              "accepted n %lld step %lld for %zu bytes", (long long)s.n, (long long)s.step, n);
        for (int64_t i = 0; i < s.n; i++) CHECK(isfinite(s.m[i]) && isfinite(s.v[i]) && s.v[i] >= 0, "moment %lld", (long long)i);
        vhead_opt_free(&s);
        return;
    }
    trainer_state ts;
    trainer_state_parse(&ts, data, n, "trainer_state.bin");
    CHECK(ts.global_step >= 0 && ts.global_step <= ADAMW_MAX_STEP && ts.epoch >= 0 && ts.epoch <= ADAMW_MAX_STEP &&
              ts.batch_in_epoch >= 0 && ts.train_n >= 1 && isfinite(ts.kl_ctrl_value) && ts.kl_ctrl_value >= 0,
          "accepted an out-of-range trainer state");
    uint8_t back[TRAINER_STATE_BYTES];   // what a save writes back is the input
    trainer_state_encode(&ts, back);
    CHECK(!memcmp(back, data, TRAINER_STATE_BYTES), "trainer state does not round-trip");
}
FUZZ_TARGET(body)
