// trainer_state.h: the trainer's own small binary state files of a checkpoint, read back on resume:
//   global_step_N/trainer_state.bin                  "RLCGRPO\x01", version, the data loader's position, the KL
//                                                     controller, the data seed, the prompt count (64 bytes)
//   global_step_N/critic/value_head_optimizer.bin    "RLCVHOPT", version, n, step, then m (n) and v (n) as fp32
// Both are little-endian with fixed offsets. A parser takes the file's bytes and checks everything a save never
// writes (length, magic, version, reserved bytes, ranges, finite moments) before anything is used: a damaged
// file ends with one line naming the file and the field. Checks against the run that resumes it (the prompt
// count, the steps per epoch, the head's size and step) are the caller's (run_state.c).
#pragma once
#include <stddef.h>
#include <stdint.h>

enum {
    TRAINER_STATE_VERSION = 1,
    TRAINER_STATE_BYTES = 64,    // magic 8, version 4, reserved 4, six 8-byte fields
    VHEAD_OPT_VERSION = 1,
    VHEAD_OPT_HEADER = 32,       // magic 8, version 4, reserved 4, n 8, step 8
};

typedef struct {
    int64_t global_step;         // steps completed, in [0, 2^40]
    int64_t epoch;               // data-loader epoch of the next batch, in [0, 2^40]
    int64_t batch_in_epoch;      // batch within that epoch, >= 0 (the run bounds it by its steps per epoch)
    double kl_ctrl_value;        // the KL controller's coefficient: finite, >= 0
    uint64_t data_seed;
    int64_t train_n;             // prompts the run trained on, >= 1
} trainer_state;

// The file's 64 bytes from ts.
void trainer_state_encode(const trainer_state *ts, uint8_t out[TRAINER_STATE_BYTES]);
// Parse len bytes of buf (the contents of path, named in errors) into ts; dies with one line on anything a
// save does not write.
void trainer_state_parse(trainer_state *ts, const void *buf, size_t len, const char *path);
// Write atomically / read and parse.
void trainer_state_save(const char *path, const trainer_state *ts);
void trainer_state_load(trainer_state *ts, const char *path);

// The value head's AdamW moments (n = H + 1: score.weight's H values, then score.bias).
typedef struct {
    int64_t n;                   // values, >= 1 (the file holds exactly 2n after its header)
    int64_t step;                // optimizer steps taken, in [0, 2^40]
    float *m, *v;                // (n) first and second moment: finite, v >= 0 (owned after a parse)
} vhead_opt_state;

// Serialize n, step, m (n), v (n) (caller frees *out; *len = 32 + 8n).
void vhead_opt_encode(int64_t n, int64_t step, const float *m, const float *v, uint8_t **out, size_t *len);
// Parse len bytes of buf (the contents of path) into s (m, v allocated: vhead_opt_free); dies with one line.
void vhead_opt_parse(vhead_opt_state *s, const void *buf, size_t len, const char *path);
void vhead_opt_save(const char *path, int64_t n, int64_t step, const float *m, const float *v);
void vhead_opt_load(vhead_opt_state *s, const char *path);
void vhead_opt_free(vhead_opt_state *s);
