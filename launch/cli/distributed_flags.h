// The flags of a distributed run, declared once: `ssd generate` and `ssd bench` call
// visit_flags(config, v) inside their own visit, so one list drives parsing, --help and the
// resolved config of both. They fill in the plain DistributedConfig the roles receive.
#pragma once

#include <cstdlib>

#include "actors/roles/distributed_config.h"
#include "launch/cli/flags.h"

namespace ssd {

template <class V>
void visit_flags(DistributedConfig& c, V&& v) {
  v(c.tp, "tp", "tensor-parallel degree of the target: ranks 0..tp-1 (mpirun -n tp+drafters)",
    {.min = 1, .max = 256});
  v(c.tp_mode, "tp-mode",
    "exact: o_proj/down_proj split by output rows, logits bit-identical to one rank (4 "
    "all-gathers per layer); megatron: split by input columns, 2 all-reduces per layer, sums "
    "in another order (greedy output can differ from one rank)",
    {.choices = {"exact", "megatron"}});
  v(c.fan_out, "fan-out",
    "ssd: branches pre-speculated per outcome position: geometric, constant, or a list "
    "F0,F1,..,FK used after a cache hit",
    {});
  v(c.fan_out_after_miss, "fan-out-after-miss",
    "ssd: the list F0,..,FK used after a miss (with a --fan-out list; default: the same)");
  v(c.fan_out_budget, "fan-out-budget",
    "ssd: branches per sequence for geometric/constant fan-out", {.min = 1, .max = 1024});
  v(c.saguaro_c, "saguaro-c",
    "ssd: Saguaro sampling, scale of the top-F draft probabilities (1 = off)",
    {.min = 1e-6, .max = 1});
  v(c.miss_policy, "miss-policy",
    "ssd: on a cache miss draft with the primary drafter, the backup (--backup), auto (by the "
    "critical batch size), or not-worse (auto, and the backup only when its measured acceptance "
    "is at least the primary's)",
    {.choices = {"auto", "not-worse", "primary", "backup"}});
  v(c.backup, "backup",
    "ssd: the backup speculator that answers misses at once: ngram (prompt lookup over the "
    "sequence) or suffix (the suffix drafter: the sequence and earlier requests)",
    {.choices = {"ngram", "suffix"}});
  v(c.miss_at, "miss-at",
    "ssd: who drafts a miss the drafter answers with a lookup (its primary is ngram or suffix, "
    "or the miss policy chose the backup): leader (the target leader, with its own copy of that "
    "lookup, at once) or drafter (the drafter rank, after the outcome's round trip)",
    {.choices = {"leader", "drafter"}});
  v(c.critical_batch, "critical-batch",
    "ssd: critical batch size b* for --miss-policy auto (default: derived from measured costs)",
    {.min = 0});
  v(c.prespec_chunk, "prespec-chunk",
    "ssd: draft the pre-speculated branches in chunks of this many, likeliest first, and stop "
    "at the first chunk boundary after the round's outcome arrives; 0: all in one call, never "
    "cut short; auto: 2 on a CPU drafter rank, 0 on a GPU (where a batch of branches costs "
    "about what one does)");
  v(c.prespec_switch, "prespec-switch",
    "ssd: auto: when a target rank shares CPUs with a drafter rank, the target leader runs "
    "rounds in blocks with pre-speculation on or off and keeps whichever it measures faster (off "
    "pays there, where the drafter's branches slow the verification down); on cores of their "
    "own, and with on: pre-speculate in every round",
    {.choices = {"auto", "on"}});
  v(c.prespec_fit, "prespec-fit",
    "ssd, one drafter rank: window: pre-speculate only the chunks expected to end before the "
    "next outcome arrives, timed on this run (nothing before the job's first outcome, whose "
    "time is not known yet); all: every planned branch until the outcome arrives, whatever it "
    "costs (hit rates of a drafter slower than verification)",
    {.choices = {"window", "all"}});
  v(c.watchdog_s, "watchdog-s",
    "deadline in seconds for any one step of a distributed run (a round, a prefill, start-up); "
    "a rank that misses it ends the job with a message",
    {.min = 0.1});
  v(c.on_drafter_loss, "on-drafter-loss",
    "when the drafter lead dies or misses the --watchdog-s deadline: continue (print one line, "
    "finish every request with plain target decoding, same output), abort (end the job), or "
    "auto (continue under mpirun's recovery mode: --enable-recovery or ssd-launch --recovery)",
    {.choices = {"auto", "abort", "continue"}});
  v(c.transport, "transport",
    "what carries the drafter link and the TP collectives: mpi, nccl (GPU ranks), or auto "
    "(nccl when built with NCCL and the backend is CUDA)",
    {.choices = {"auto", "mpi", "nccl"}});
  v(c.devices, "devices",
    "GPU of each global rank, e.g. 0,1,2,3,4 (default: the launcher's local rank); ignored "
    "when no GPU is used");
  v(c.share_devices, "share-devices",
    "allow two ranks of one node on one GPU (refused by default)");
  v(c.link_emulate, "link-emulate",
    "LATENCY_US[,GBPS]: add a one-way latency (and a bandwidth limit in GB/s) to every "
    "target<->drafter message, on any transport (the start-up link probe measures it too)");
  v(c.trace_json, "trace-json",
    "write the run's timeline from every rank (forwards, drafts, pre-speculation, waits, "
    "messages, cache hits) as one Chrome trace-event JSON file (Perfetto, chrome://tracing)");
}

// The fault-injection plan of this process (SSD_FAULT, actors/roles/fault_injection.h): read
// once, right after the flags, by every command that runs a distributed job.
inline FaultPlan fault_plan_from_env() {
  const char* v = std::getenv("SSD_FAULT");
  return parse_fault_plan(v ? v : "");
}

}  // namespace ssd
