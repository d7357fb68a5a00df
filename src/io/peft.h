// peft.h: PEFT's LoRA adapter folder (shared/spec/lora.md §3) <-> rlc's adapter set (model/lora.h).
// DIR/adapter_config.json (PEFT's LoraConfig fields, sorted keys) and DIR/adapter_model.safetensors (F32,
// __metadata__ {"format":"pt"}) with PEFT's names: base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight
// (r, in) and ...lora_B.weight (out, r). PEFT and vLLM load the folder rlc writes as it is.
#pragma once
#include "model/lora.h"

// Write the folder atomically (file by file; DIR is created). base_name: base_model_name_or_path (may be NULL).
// target_modules lists the short names actually adapted.
void peft_save(const char *dir, const lora_layout *ll, const param_set *ad, const char *base_name);
// Read DIR for the model of cfg: builds *ll from the tensors present and fills a new *ad (free both). Dies with one
// line naming the file and field/tensor: a missing adapter_config.json field (peft_type, r, lora_alpha,
// target_modules), peft_type other than LORA, an option rlc does not implement (use_dora, modules_to_save, bias,
// lora_bias, fan_in_fan_out, rank_pattern, alpha_pattern, layer_replication, target_parameters), r not equal to
// the tensors' rank, a tensor that is not a LoRA A/B of a projection of this model, a shape that does not match
// the base, a module with only A or only B, or no adapter tensor at all. Accepts F32/BF16/F16 tensors and names
// that still carry an adapter name (".lora_A.default.weight").
void peft_load(const char *dir, const model_config *cfg, lora_layout *ll, param_set *ad);
