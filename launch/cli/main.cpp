// The ssd executable: `ssd <command> [flags]`. Each command parses its own flags (declared once
// in its args struct) and runs; every error a user can cause ends as one line on stderr and a
// exit status of 1 (2 when no or an unknown command is given).
#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <string_view>

#include "launch/cli/bench_command.h"
#include "launch/cli/bench_kernels_command.h"
#include "launch/cli/build_info.h"
#include "launch/cli/distill_command.h"
#include "launch/cli/eval_domino_command.h"
#include "launch/cli/generate_command.h"
#include "launch/cli/info_command.h"
#include "launch/cli/probe_links_command.h"
#include "launch/cli/serve_command.h"
#include "launch/cli/sim_command.h"
#include "launch/cli/topo_command.h"
#include "launch/cli/synth_prompts_command.h"
#include "launch/cli/train_domino_command.h"
#include "runtime/core/error.h"
#include "topology/binding.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, const char* const* argv);
};

constexpr Command kCommands[] = {
    {"generate", "generate text from a prompt (--mode ar: the target alone; --mode sd: speculative)",
     ssd::run_generate_command},
    {"bench", "compare AR and SD (drafters x draft lengths) over a prompt file", ssd::run_bench_command},
    {"serve", "serve the model over HTTP (OpenAI API) with continuous batching",
     ssd::run_serve_command},
    {"info", "print a model file's architecture, tensors and tokenizer", ssd::run_info_command},
    {"probe-links", "measure latency and bandwidth of the job's links (run under mpirun)",
     ssd::run_probe_links_command},
    {"topo", "describe this node (cores, caches, GPUs) and where a layout's ranks would sit",
     ssd::run_topo_command},
    {"bench-kernels", "measure bandwidth, decode roofline, verify cost and prefill of the kernels",
     ssd::run_bench_kernels_command},
    {"synth-prompts", "write a prompt file of user requests sampled from the target (Magpie-style)",
     ssd::run_synth_prompts_command},
    {"distill", "build a self-distillation dataset (target responses + hidden states) for drafters",
     ssd::run_distill_command},
    {"train-domino", "train a Domino drafter for a target from `ssd distill` data",
     ssd::run_train_domino_command},
    {"eval-domino", "offline acceptance of a Domino checkpoint on `ssd distill` data",
     ssd::run_eval_domino_command},
    {"simulate", "predict AR / SD / SSD tok/s on a described GPU cluster (round simulator)",
     ssd::run_sim_command},
};

void print_usage() {
  fmt::print("usage: ssd <command> [flags]     (ssd <command> --help lists the flags)\n\ncommands:\n");
  for (const auto& c : kCommands) fmt::print("  {:<14} {}\n", c.name, c.summary);
  fmt::print("\n{}\n", ssd::build_description());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    fmt::print("{}\n", ssd::build_description());
    return 0;
  }
  for (const auto& c : kCommands) {
    if (std::string_view(argv[1]) != c.name) continue;
    try {
      // Several ranks on this machine (mpirun): each binds to its own cores before any thread
      // starts, so the thread pools of different ranks never share a core.
      const ssd::BindResult bind = ssd::bind_local_rank_from_env();
      if (bind.bound || !bind.cpus.empty()) fmt::print(stderr, "ssd: {}\n", bind.note);
      return c.run(argc - 2, argv + 2);
    } catch (const ssd::Error& e) {
      fmt::print(stderr, "ssd {}: error: {}\n", c.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      fmt::print(stderr, "ssd {}: unexpected error: {}\n", c.name, e.what());
      return 1;
    }
  }
  fmt::print(stderr, "ssd: unknown command '{}' (ssd --help lists the commands)\n", argv[1]);
  return 2;
}
