// finite.h: non-finite checks over parameter-layout buffers (weights, optimizer moments). A NaN or inf
// must never reach a checkpoint: the trainer checks before each save and stops naming the step and the
// first bad tensor, so the last good checkpoint stays the latest; loads check the same way.
#pragma once
#include <stdint.h>

#include "model/params.h"

typedef struct {
    int tensor;       // index into the layout's tensors, -1 when every value is finite
    int64_t element;  // first bad element within that tensor
    float value;      // its value (nan, inf or -inf)
} finite_report;

// The first non-finite value of data (the layout's numel floats) in tensor order. Deterministic and
// independent of the thread count (the scan is parallel; the lowest bad index wins).
finite_report finite_scan(const float *data, const param_layout *pl);
finite_report finite_scan_ref(const float *data, const param_layout *pl);
// Dies "<what>: tensor '<name>' element <i> is <value>; <hint>" at the first non-finite value; returns
// otherwise. what names the buffer and when ("step 12: weights after the optimizer step").
void finite_check_params(const float *data, const param_layout *pl, const char *what, const char *hint);
// The trainer's guard before writing the checkpoint of `step`: the weights, and the AdamW moments m, v
// when given (NULL: sharded elsewhere), must be finite; dies naming the step and the first bad tensor.
void finite_check_save(const float *params, const float *m, const float *v, const param_layout *pl, int64_t step);
