// pg_losses.h: the bodies of verl's registered policy losses, one function per `loss_mode` (the registry and its
// documentation are in policy_loss.h). Each returns pg_loss for one micro-batch and accumulates dlp += d/dlp.
#pragma once
#include "rl/policy_loss.h"

double rl_pg_vanilla(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                     const rl_batch_info *gbi);
double rl_pg_gspo(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                  const rl_batch_info *gbi);
double rl_pg_sapo(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                  const rl_batch_info *gbi);
double rl_pg_gpg(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                 const rl_batch_info *gbi);
double rl_pg_clip_cov(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                      const rl_batch_info *gbi);
double rl_pg_kl_cov(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                    const rl_batch_info *gbi);
double rl_pg_geo_mean(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                      const rl_batch_info *gbi);
double rl_pg_dro(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                 const rl_batch_info *gbi);
double rl_pg_cispo(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                   const rl_batch_info *gbi);
double rl_pg_dppo_tv(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                     const rl_batch_info *gbi);
double rl_pg_dppo_kl(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg, rl_agg_mode mode,
                     const rl_batch_info *gbi);
double rl_pg_bypass_mode(float *dlp, rl_pg_metrics *met, const rl_pg_in *in, const rl_loss_cfg *cfg,
                         rl_agg_mode mode, const rl_batch_info *gbi);
