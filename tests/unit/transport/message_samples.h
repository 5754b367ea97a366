// One instance of every protocol message with every field set to a value other than its default,
// so that a round trip that drops or swaps a field fails the field-wise comparison. Shared by the
// single-process tests and the mpirun ping-pong test.
#pragma once

#include <tuple>

#include "actors/transport/protocol.h"

namespace ssd::transport_test {

inline ProcessedDist sample_dist(int32_t first) {
  ProcessedDist d;
  d.tokens = {{first, 0.75}, {first + 1, 0.25 - 1.0 / 3e9}};  // doubles, compared exactly
  return d;
}

inline SeqSpeculation sample_seq_spec(int32_t seq) {
  SeqSpeculation s;
  s.seq = seq;
  s.source = 1;
  s.tokens = {11, 12, 13};
  s.q = {sample_dist(11), sample_dist(12), sample_dist(13)};
  return s;
}

inline Speculation sample_speculation(int32_t seq) {
  Speculation s;
  s.seq = seq;
  s.id = 7;
  s.tokens = {21, 22};
  s.q = {sample_dist(21), sample_dist(22)};
  s.predicted = {sample_dist(30), sample_dist(31), sample_dist(32)};
  s.fan_out = {3, 2, 1};
  s.source = SpecSource::kBackup;
  s.asked = 2;
  return s;
}

// Every message kind with a struct, in a tuple (iterate with std::apply).
inline auto sample_messages() {
  Hello hello;
  hello.world = 5;
  hello.rank = 3;
  hello.role = Role::kDrafter;
  hello.tp = 2;
  hello.n_drafters = 3;
  hello.config_digest = 0x0123456789abcdefull;
  hello.model_digest = 0xfedcba9876543210ull;
  HelloReply reply{false, "configuration mismatch: because"};
  TargetForward fwd;
  fwd.tokens = {1, 2, 3, 4};
  fwd.positions = {7, 8, 8, 9};
  fwd.seqs = {0, 0, 1, 1};
  fwd.mask = {1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1};
  fwd.logits_rows = {1, 3};
  fwd.hidden_layers = {-1, 4};
  TargetKvCreate create{6};
  TargetKvRelease release{9};
  TargetKvTruncate truncate{4, 1234567890123};
  TargetKvCompact compact{3, 77, {0, 2, 5}};
  StartSeqs start;
  start.seqs = {0, 5};
  start.prompts = {{1, 2, 3}, {4}};
  start.emitted = {{9}, {8}};
  start.streams = {3, 0x1234567890ull};
  start.feature_rows = {3, 1};
  start.feature_dim = 1152;
  start.prespeculate = false;
  JoinSeqs join{{7}, {{5, 6}}, {{2}}, {11}, {2}, 576};
  start.first_k = {4, 0};
  start.memory_scope = 3;
  start.push = true;
  join.first_k = {3};
  Features features{2, 100, 3, 8};
  Outcome outcome;
  outcome.round = 41;
  SeqSpeculation drafted = sample_seq_spec(6);  // a leader-drafted miss (--miss-at leader)
  drafted.source = static_cast<uint8_t>(SpecSource::kBackup);
  outcome.seqs = {SeqOutcome{0, 2, {11, 12, 40}, 17, 3, 4, true}, SeqOutcome{5, 0, {17}, 9, 1, 0},
                  SeqOutcome{6, 1, {8, 9}, 3, 2, 3, false, true, drafted}};
  outcome.feature_dim = 576;
  outcome.verify_s = 0.0125;
  SpeculationMsg spec;
  spec.round = 42;
  spec.seqs = {sample_seq_spec(0), sample_seq_spec(5)};
  spec.miss_lookup = static_cast<uint8_t>(MissLookup::kPrimary);
  DrafterReady ready{{3, 7}, "domino:/x"};
  PrespecWork work;
  work.round = 43;
  work.outcomes = outcome.seqs;
  work.next = {sample_speculation(0), sample_speculation(5)};
  work.feature_dim = 64;
  PrespecShare share;
  share.round = 43;
  share.from_rank = 4;
  share.entries = {CacheEntry{0, 7, 2, 40, sample_speculation(0)}, CacheEntry{5, 1, 0, 3, {}}};
  DrafterStatsMsg stats;
  stats.rounds = 100;
  stats.hits = 70;
  stats.misses = 30;
  stats.fallback_primary = 20;
  stats.fallback_backup = 10;
  stats.hits_at_k = {1, 2, 3};
  stats.outcomes_at_k = {4, 5, 6};
  stats.mal_hit = 2.5;
  stats.mal_miss = 1.5;
  stats.branches = 800;
  stats.branches_planned = 900;
  stats.branches_cached = 850;
  stats.prespec_cut = 12;
  stats.predicted = 75;
  stats.prespec_s = 1.25;
  stats.fallback_s = 0.5;
  stats.busy_s = 2;
  stats.fan_out_after_hit = {4, 2, 2};
  stats.fan_out_after_miss = {3, 3, 2};
  stats.critical_batch = 6;
  PrespecPush push;
  push.round = 41;
  push.entries = {PushedSpec{0, 1, 40, {7, 8}, sample_speculation(0).q},
                  PushedSpec{5, 0, 3, {}, {}}};
  push.miss_lookup = static_cast<uint8_t>(MissLookup::kBackup);
  FinishSeqs finish{{0, 5}};
  ErrorMsg error{3, Role::kDrafter, "out of memory while pre-speculating"};
  Heartbeat beat{2, "pre-speculating round 42", 42};
  Ping ping{0xdeadbeefcafeull};
  Pong pong{0xfeedfaceull};
  return std::make_tuple(hello, reply, fwd, create, release, truncate, compact, TargetShutdown{},
                         start, features, outcome, spec, share, finish, DrafterShutdown{}, error,
                         beat, ping, pong, ready, work, DrafterStatsAsk{}, stats,
                         PrespecCut{43}, join, push);
}

}  // namespace ssd::transport_test
