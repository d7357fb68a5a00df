// validate.h: verl's _validate + process_validation_metrics: generate on data.val_files (greedy by default,
// val_kwargs), score, and reduce mean@n, and for n > 1 std@n and the bootstrapped best@k / worst@k / maj@k, per
// data source and reward variable (val-core/..., val-aux/...).
#pragma once
#include "trainer/metrics.h"
#include "trainer/ppo.h"

// Validation metrics into m (nothing without val_files). Non-finite weights before it, and a non-finite output (a
// response token's log-prob, the reward's score or an extra value) are one error line naming the step (and the row).
void validate_run(ppo_trainer *g, rlc_metrics *m);
