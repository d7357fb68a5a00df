// cli.h: subcommands of the rlc binary. Each lives in src/cli/cmd_<name>.c.
#pragma once

#define RLC_VERSION "0.1.0"

typedef int (*rlc_cmd_fn)(int argc, char **argv);   // argv[0] is the subcommand name

int cmd_init(int argc, char **argv);       // random Qwen3 checkpoint
int cmd_logprob(int argc, char **argv);    // score sequences
int cmd_sft(int argc, char **argv);        // supervised fine-tuning
int cmd_tokenize(int argc, char **argv);   // tokenizer CLI
int cmd_generate(int argc, char **argv);   // rollout engine CLI
int cmd_train(int argc, char **argv);      // GRPO/PPO trainer
int cmd_eval(int argc, char **argv);       // validation only
int cmd_demo(int argc, char **argv);       // the embedded end-to-end demo
int cmd_gen_task(int argc, char **argv);   // synthetic GSM8K-style task generator
int cmd_train_tokenizer(int argc, char **argv); // byte-level BPE trainer
int cmd_merge_lora(int argc, char **argv);  // PEFT adapter + base -> merged HF checkpoint
int cmd_env(int argc, char **argv);        // environments for multi-turn rollouts (rlc-env/1)

// Small argument helpers shared by the commands: "--key value" and "--key=value" forms.
// cli_opt returns the value of --name or NULL; cli_flag returns 1 if --name is present.
// Unknown options are reported by cli_check_unknown, which dies naming the option.
typedef struct {
    int argc;
    char **argv;
    unsigned char *used;   // (argc)
    const char *cmd;
} cli_args;
void cli_args_init(cli_args *a, int argc, char **argv);
void cli_args_free(cli_args *a);
const char *cli_opt(cli_args *a, const char *name);
const char *cli_opt_req(cli_args *a, const char *name);     // dies if missing
int cli_flag(cli_args *a, const char *name);
long long cli_int(cli_args *a, const char *name, long long def, long long lo, long long hi);
double cli_double(cli_args *a, const char *name, double def, double lo, double hi);
void cli_check_unknown(cli_args *a, const char *usage);
