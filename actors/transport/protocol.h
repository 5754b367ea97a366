// The wire protocol between ranks: every message kind, the fixed frame header, and the typed
// control messages. This is the one place a kind, a tag or a byte layout is defined; nothing else
// in the project spells a tag number.
//
// A frame on the wire is
//   WireHeader (32 bytes) | head (head_bytes) | padding to 8 bytes | bulk (the rest)
// where head is a message struct below serialized with a Cereal binary archive and bulk is raw
// bytes (target features, token blocks) that travel without being re-encoded. A typed control
// message has no bulk; a raw buffer (Transport::send_raw) has no head; Features has both. The bulk
// starts 8-aligned within the frame, so a float or double view of it is aligned.
//
// Order guarantees (kept by every Transport): the messages one rank sends to one peer over one
// transport (the channel) arrive in the order they were sent, whatever their kinds; each frame
// carries a per-(sender, receiver) sequence number that the receiver checks, so a lost or
// reordered frame is reported, never consumed silently. There is no order between different
// senders, nor between different transports (e.g. the TP group's and the drafter link's).
//
// Versioning: kProtocolVersion changes whenever a kind, a struct or the frame layout changes.
// Hello and HelloReply are frozen (their layout never changes), so ranks built from different
// versions can still read each other's Hello and refuse the job with both versions named.
// Bulk payloads are in the sender's byte order; ranks of one job share an architecture (checked
// by the magic, which reads differently on a machine of the other endianness).
#pragma once

#include <cereal/types/common.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/saguaro/miss_policy.h"
#include "runtime/saguaro/speculation_cache.h"
#include "runtime/sampling/sampler.h"

namespace ssd {

inline constexpr uint32_t kWireMagic = 0x31445353;  // "SSD1" in memory on a little-endian rank
inline constexpr uint16_t kProtocolVersion = 11;  // 2: PrespecCut, cut-short figures; 3: JoinSeqs;
                                                 // 4: speculation lengths (--k auto);
                                                 // 5: StartSeqs::memory_scope; 6: a length of 0
                                                 // gets no speculation (decode step),
                                                 // Outcome::prespeculate; 7: JoinSeqs::first_k;
                                                 // 8: PrespecPush, SeqOutcome::pushed;
                                                 // 9: pushes per chunk (a round's add up), the
                                                 // link probe's bandwidth frame carries its
                                                 // count and size, an end Ping;
                                                 // 10: SeqOutcome::leader_drafted and its
                                                 // speculation, miss_lookup in SpeculationMsg
                                                 // and PrespecPush (--miss-at leader);
                                                 // 11: the drafter lead's Heartbeats to a
                                                 // leader that takes pushes

// Every kind of message, one enum; its value is also the MPI tag (tags must stay < 32768).
enum class MsgKind : uint16_t {
  // start-up handshake (any rank -> rank 0, then rank 0 -> every rank)
  kHello = 1,
  kHelloReply = 2,
  // target leader (rank 0) -> TP workers (ranks 1..T-1)
  kTargetForward = 16,
  kTargetKvCreate = 17,
  kTargetKvRelease = 18,
  kTargetKvTruncate = 19,
  kTargetKvCompact = 20,
  kTargetShutdown = 21,
  // drafter link: target leader <-> drafter ranks, drafter lead <-> other drafter ranks
  kStartSeqs = 32,
  kFeatures = 33,
  kOutcome = 34,
  kSpeculation = 35,
  kPrespecShare = 36,
  kFinishSeqs = 37,
  kDrafterShutdown = 38,
  kDrafterReady = 39,
  kPrespecWork = 40,
  kDrafterStatsAsk = 41,
  kDrafterStats = 42,
  kPrespecCut = 43,
  kJoinSeqs = 44,
  kPrespecPush = 45,
  // any link
  kError = 48,
  kHeartbeat = 49,
  kPing = 50,
  kPong = 51,
  kRawBytes = 52,  // opaque bytes for side channels and tests (send_raw with no head)
};

// Name of a kind for messages ("Outcome"); "kind 77" for a value outside the enum.
std::string kind_name(MsgKind kind);
// True when `value` is one of the enumerators above.
bool is_known_kind(uint16_t value);

// Fixed header of every frame. Layout is part of the protocol: 32 bytes, no implicit padding.
struct WireHeader {
  uint32_t magic = kWireMagic;
  uint16_t version = kProtocolVersion;
  uint16_t kind = 0;           // MsgKind
  uint32_t flags = 0;          // reserved, 0
  uint32_t head_bytes = 0;     // Cereal-encoded head that follows the header
  uint64_t payload_bytes = 0;  // everything after the header: head + padding + bulk
  uint64_t seq = 0;            // per (sender, receiver) sequence number, from 0
};
static_assert(sizeof(WireHeader) == 32, "WireHeader is a wire format: 32 bytes, no padding");

// The largest frame a rank builds or accepts, header included. A length read from a peer (the TP
// group's frame length, an NCCL frame's payload) is checked against it before any allocation.
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 32;

// Offset of the bulk inside a frame with a head of `head_bytes`.
inline constexpr uint64_t bulk_offset(uint64_t head_bytes) {
  return sizeof(WireHeader) + (head_bytes + 7) / 8 * 8;
}

enum class Role : uint8_t { kTarget = 0, kDrafter = 1 };
std::string_view role_name(Role role);  // "target" / "drafter"

// An enum (or a small integer code) on the wire: its underlying integer, checked on load to be at
// most kLast, so a corrupted head never yields a value outside the enumerators. Serialize a field
// as wire_enum<kLast>(field).
template <class T, auto kLast> struct WireEnum {
  T& value;
  template <class A> void serialize(A& a) {
    using U = typename std::conditional_t<std::is_enum_v<T>, std::underlying_type<T>,
                                 std::type_identity<T>>::type;
    U v = static_cast<U>(value);
    a(v);
    if constexpr (A::is_loading::value) {
      if (v > static_cast<U>(kLast))
        throw cereal::Exception("enum value " + std::to_string(v) + " is past the last (" +
                                std::to_string(static_cast<U>(kLast)) + ")");
      value = static_cast<T>(v);
    }
  }
};
template <auto kLast, class T> WireEnum<T, kLast> wire_enum(T& value) { return {value}; }

// Message structs: a kKind, a Cereal serialize() listing every field (the wire order), and a
// field-wise operator== (round-trip tests compare every field through it).

// ---- start-up --------------------------------------------------------------------------------

// Sent by every rank to rank 0 at start-up (frozen layout, see the top).
struct Hello {
  static constexpr MsgKind kKind = MsgKind::kHello;
  uint32_t magic = kWireMagic;
  uint16_t version = kProtocolVersion;
  int32_t world = 0;
  int32_t rank = 0;
  Role role = Role::kTarget;
  int32_t tp = 0;
  int32_t n_drafters = 0;
  uint64_t config_digest = 0;  // digest64 of the resolved configuration string
  uint64_t model_digest = 0;   // digest of the model(s) the rank loaded
  template <class A> void serialize(A& a) {
    a(magic, version, world, rank, wire_enum<Role::kDrafter>(role), tp, n_drafters, config_digest,
      model_digest);
  }
  friend bool operator==(const Hello&, const Hello&) = default;
};

// Rank 0's verdict on the whole job's Hellos, sent to every rank (frozen layout).
struct HelloReply {
  static constexpr MsgKind kKind = MsgKind::kHelloReply;
  bool ok = false;
  std::string what;  // why the job is refused (empty when ok)
  template <class A> void serialize(A& a) { a(ok, what); }
  friend bool operator==(const HelloReply&, const HelloReply&) = default;
};

// ---- target leader -> TP workers --------------------------------------------------------------

// One forward of the TP group (mirrors ssd::Batch; every worker runs the same batch).
struct TargetForward {
  static constexpr MsgKind kKind = MsgKind::kTargetForward;
  std::vector<int32_t> tokens;         // [n]
  std::vector<int32_t> positions;      // [n]
  std::vector<int32_t> seqs;           // [n] KV sequence of each token
  std::vector<uint8_t> mask;           // [n, n] or empty for causal
  std::vector<int32_t> logits_rows;    // rows whose logits the leader needs
  std::vector<int32_t> hidden_layers;  // layers whose hidden states the leader needs
  template <class A> void serialize(A& a) {
    a(tokens, positions, seqs, mask, logits_rows, hidden_layers);
  }
  friend bool operator==(const TargetForward&, const TargetForward&) = default;
};

struct TargetKvCreate {  // every rank creates a sequence; ids agree because all run the same ops
  static constexpr MsgKind kKind = MsgKind::kTargetKvCreate;
  int32_t expect_seq = -1;  // the id the leader got (workers check theirs equals it)
  template <class A> void serialize(A& a) { a(expect_seq); }
  friend bool operator==(const TargetKvCreate&, const TargetKvCreate&) = default;
};

struct TargetKvRelease {
  static constexpr MsgKind kKind = MsgKind::kTargetKvRelease;
  int32_t seq = 0;
  template <class A> void serialize(A& a) { a(seq); }
  friend bool operator==(const TargetKvRelease&, const TargetKvRelease&) = default;
};

struct TargetKvTruncate {
  static constexpr MsgKind kKind = MsgKind::kTargetKvTruncate;
  int32_t seq = 0;
  int64_t len = 0;
  template <class A> void serialize(A& a) { a(seq, len); }
  friend bool operator==(const TargetKvTruncate&, const TargetKvTruncate&) = default;
};

struct TargetKvCompact {
  static constexpr MsgKind kKind = MsgKind::kTargetKvCompact;
  int32_t seq = 0;
  int64_t start = 0;
  std::vector<int32_t> keep;
  template <class A> void serialize(A& a) { a(seq, start, keep); }
  friend bool operator==(const TargetKvCompact&, const TargetKvCompact&) = default;
};

struct TargetShutdown {
  static constexpr MsgKind kKind = MsgKind::kTargetShutdown;
  template <class A> void serialize(A&) {}
  friend bool operator==(const TargetShutdown&, const TargetShutdown&) = default;
};

// ---- drafter link -----------------------------------------------------------------------------

// Non-intrusive Cereal encodings of the runtime's own types that travel on the drafter link.
template <class A> void serialize(A& a, TokenProb& t) { a(t.id, t.prob); }
template <class A> void serialize(A& a, ProcessedDist& d) { a(d.tokens); }
template <class A> void serialize(A& a, Speculation& s) {
  a(s.seq, s.id, s.tokens, s.q, s.predicted, s.fan_out, wire_enum<SpecSource::kDecodeStep>(s.source),
    s.asked);
}
template <class A> void serialize(A& a, CacheEntry& e) { a(e.seq, e.parent, e.k, e.bonus, e.spec); }
inline bool operator==(const TokenProb& x, const TokenProb& y) {
  return x.id == y.id && x.prob == y.prob;
}
inline bool operator==(const ProcessedDist& x, const ProcessedDist& y) {
  return x.tokens == y.tokens;
}
inline bool operator==(const Speculation& x, const Speculation& y) {
  return x.seq == y.seq && x.id == y.id && x.tokens == y.tokens && x.q == y.q &&
         x.predicted == y.predicted && x.fan_out == y.fan_out && x.source == y.source &&
         x.asked == y.asked;
}
inline bool operator==(const CacheEntry& x, const CacheEntry& y) {
  return x.seq == y.seq && x.parent == y.parent && x.k == y.k && x.bonus == y.bonus &&
         x.spec == y.spec;
}

// Drafter lead -> target leader once its drafter is loaded: the target layers whose hidden states
// it conditions on (sent with every outcome), and its name for the figures.
struct DrafterReady {
  static constexpr MsgKind kKind = MsgKind::kDrafterReady;
  std::vector<int32_t> feature_layers;
  std::string name;
  template <class A> void serialize(A& a) { a(feature_layers, name); }
  friend bool operator==(const DrafterReady&, const DrafterReady&) = default;
};

// New sequences for every drafter rank (target leader -> drafter lead, which relays it to the
// other drafter ranks): prompts, the tokens the target emitted from the prefill (the first one),
// Philox streams. Bulk: the prompt's target features, [sum feature_rows, dim].
struct StartSeqs {
  static constexpr MsgKind kKind = MsgKind::kStartSeqs;
  std::vector<int32_t> seqs;                  // [B]
  std::vector<std::vector<int32_t>> prompts;  // [B][prompt length]
  std::vector<std::vector<int32_t>> emitted;  // [B][>= 1]
  std::vector<uint64_t> streams;              // [B]
  std::vector<int64_t> feature_rows;          // [B] rows of features in the bulk (0: none)
  int64_t feature_dim = 0;                    // floats per row (layers x hidden size)
  bool prespeculate = true;  // ssd: pre-speculate while the target verifies; false: sd (draft
                             // after each outcome, with the primary drafter)
  std::vector<int32_t> first_k;  // [B] the length of each first speculation (0..K; 0: a decode
                                 // step, as SeqOutcome::next_k; empty: K for all)
  uint64_t memory_scope = 0;     // the drafters' memory of earlier requests these join
                                 // (Drafter::set_memory_scope); 0 by default
  bool push = false;  // ssd: the leader takes pre-speculations pushed to it (PrespecPush)
  template <class A> void serialize(A& a) {
    a(seqs, prompts, emitted, streams, feature_rows, feature_dim, prespeculate, first_k,
      memory_scope, push);
  }
  friend bool operator==(const StartSeqs&, const StartSeqs&) = default;
};

// Sequences joining a running batch (the server's continuous batching; target leader -> drafter
// lead, relayed to the other drafter ranks): the fields and bulk of StartSeqs, without a round of
// their own. The lead starts them and drafts their first speculations together with its answer
// to the Outcome that follows (which the leader sends right after), so they take part in the
// next round; a batch with nothing running starts with StartSeqs instead.
struct JoinSeqs {
  static constexpr MsgKind kKind = MsgKind::kJoinSeqs;
  std::vector<int32_t> seqs;                  // [B]
  std::vector<std::vector<int32_t>> prompts;  // [B][prompt length]
  std::vector<std::vector<int32_t>> emitted;  // [B][>= 1]
  std::vector<uint64_t> streams;              // [B]
  std::vector<int64_t> feature_rows;          // [B] rows of features in the bulk (0: none)
  int64_t feature_dim = 0;                    // floats per row (layers x hidden size)
  std::vector<int32_t> first_k;  // [B] the length of each first speculation (0..K); empty: K
  template <class A> void serialize(A& a) {
    a(seqs, prompts, emitted, streams, feature_rows, feature_dim, first_k);
  }
  friend bool operator==(const JoinSeqs&, const JoinSeqs&) = default;
};

// Target hidden states of context positions [from, from + rows) of one sequence. The floats go as
// bulk: [rows, dim] row-major (dim = layers x hidden size, as Drafter::set_features takes them).
struct Features {
  static constexpr MsgKind kKind = MsgKind::kFeatures;
  int32_t seq = 0;
  int64_t from = 0;
  int64_t rows = 0;
  int64_t dim = 0;
  template <class A> void serialize(A& a) { a(seq, from, rows, dim); }
  friend bool operator==(const Features&, const Features&) = default;
};

// One sequence's speculation for the next round: a chain of tokens with each node's q (what the
// target needs to verify it; the drafter keeps its predictions to itself).
struct SeqSpeculation {
  int32_t seq = 0;
  uint8_t source = 0;                // SpecSource: initial, cache (a hit), primary, backup
  std::vector<int32_t> tokens;       // [nodes]
  std::vector<ProcessedDist> q;      // [nodes] exact distributions (verification needs them)
  template <class A> void serialize(A& a) {
    a(seq, wire_enum<static_cast<uint8_t>(SpecSource::kBackup)>(source), tokens, q);
  }
  friend bool operator==(const SeqSpeculation&, const SeqSpeculation&) = default;
};

// One sequence's verification outcome: k accepted, the emitted tokens (accepted + bonus), and
// which target-feature rows of the bulk belong to it (positions [feature_from, + feature_rows)).
struct SeqOutcome {
  int32_t seq = 0;
  int32_t accepted = 0;
  std::vector<int32_t> emitted;
  int64_t feature_from = 0;
  int64_t feature_rows = 0;
  // The length (0..K) of the next speculation the target will verify for this sequence, chosen
  // by the leader (--k auto; a fixed --k sends K): the drafter answers with that many tokens.
  // -1: K. 0: a plain decode step, which gets no speculation (see SpeculationMsg).
  int32_t next_k = -1;
  // The leader found this outcome in the round's PrespecPush and verifies that speculation next:
  // the drafter's cache must hit it too, and the answer has no entry for the sequence.
  bool pushed = false;
  // --miss-at leader: the outcome was not in the push, and the drafter said it answers such a
  // miss with a lookup (SpeculationMsg::miss_lookup), so the leader drafted the next speculation
  // itself with its copy of that lookup drafter and verifies it next (`drafted`: its tokens, the
  // q of each, the source kPrimary or kBackup). The drafter adopts it as the sequence's
  // speculation, pre-speculates after it, and leaves the sequence out of the answer. Never
  // together with `pushed`; a malformed one (q and tokens of different lengths, another source,
  // another sequence, more than K tokens, or a next_k of 0) fails to decode or is refused.
  bool leader_drafted = false;
  SeqSpeculation drafted;
  template <class A> void serialize(A& a) {
    a(seq, accepted, emitted, feature_from, feature_rows, next_k, pushed, leader_drafted, drafted);
    if constexpr (A::is_loading::value) check_loaded();
  }
  friend bool operator==(const SeqOutcome&, const SeqOutcome&) = default;
  void check_loaded() const;  // throws cereal::Exception naming what is malformed (protocol.cpp)
};

// Target leader -> drafter lead, once per round. Bulk: the sequences' feature rows in order.
struct Outcome {
  static constexpr MsgKind kKind = MsgKind::kOutcome;
  int64_t round = 0;  // the round the drafter's answer is for
  std::vector<SeqOutcome> seqs;
  int64_t feature_dim = 0;
  double verify_s = 0;  // the target's verification time of the round (for the miss policy)
  // ssd: whether the drafter pre-speculates after answering (the leader's PrespecSwitch turns it
  // off in blocks of rounds where it measures drafting after each outcome faster; a single
  // drafter rank follows it, several always pre-speculate, as their shares keep them in step).
  bool prespeculate = true;
  template <class A> void serialize(A& a) { a(round, seqs, feature_dim, verify_s, prespeculate); }
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

// Drafter lead -> target leader: the answer to an Outcome (or to StartSeqs for round 0).
// Decode steps: a sequence whose length for the round is 0 (SeqOutcome::next_k, StartSeqs::first_k)
// has no entry; when every sequence of the Outcome (or StartSeqs) has length 0 and none joined,
// there is no answer at all, and the leader verifies the round without waiting for the drafter.
// Both sides derive this from the lengths the leader sent, so they cannot disagree; the leader
// checks that the entries it gets are exactly the sequences it asked a length > 0 for.
struct SpeculationMsg {
  static constexpr MsgKind kKind = MsgKind::kSpeculation;
  int64_t round = 0;
  std::vector<SeqSpeculation> seqs;
  // How the drafter would answer the next round's misses (MissLookup, miss_policy.h): with a
  // lookup (its primary is one, or its miss policy chooses the backup), which the leader may
  // draft itself under --miss-at leader, or kNone: the leader waits for the drafter's answer.
  uint8_t miss_lookup = 0;
  template <class A> void serialize(A& a) {
    a(round, seqs, wire_enum<static_cast<uint8_t>(MissLookup::kBackup)>(miss_lookup));
  }
  friend bool operator==(const SpeculationMsg&, const SpeculationMsg&) = default;
};

// Drafter lead -> other drafter ranks after answering: the outcomes and the answers, so every
// drafter rank holds the same speculations and plans the same branches. Bulk as in Outcome.
struct PrespecWork {
  static constexpr MsgKind kKind = MsgKind::kPrespecWork;
  int64_t round = 0;
  std::vector<SeqOutcome> outcomes;
  std::vector<Speculation> next;
  int64_t feature_dim = 0;
  template <class A> void serialize(A& a) { a(round, outcomes, next, feature_dim); }
  friend bool operator==(const PrespecWork&, const PrespecWork&) = default;
};

// A secondary drafter rank's share of the round's pre-speculation, for the lead's cache.
struct PrespecShare {
  static constexpr MsgKind kKind = MsgKind::kPrespecShare;
  int64_t round = 0;
  int32_t from_rank = 0;
  std::vector<CacheEntry> entries;
  template <class A> void serialize(A& a) { a(round, from_rank, entries); }
  friend bool operator==(const PrespecShare&, const PrespecShare&) = default;
};

// Drafter lead -> other drafter ranks: the outcome of `round` has arrived, so stop drafting that
// round's branches at the next chunk boundary and send what is done (--prespec-chunk > 0 only).
struct PrespecCut {
  static constexpr MsgKind kKind = MsgKind::kPrespecCut;
  int64_t round = 0;
  template <class A> void serialize(A& a) { a(round); }
  friend bool operator==(const PrespecCut&, const PrespecCut&) = default;
};

// Drafter lead -> target leader, the pre-speculation of `round` as it is drafted (only when the
// leader asked for it, StartSeqs::push): each chunk's cache entries as soon as the chunk is
// drafted (and, with several drafter ranks, each rank's share as it reaches the lead), so that on
// a hit the leader has the next speculation at once, without the round trip outcome -> answer.
// The pushes of one round add up to the entries the drafter installs. The leader looks the
// round's outcome up in what has arrived when its verification ends; what it finds it verifies
// next, and tells the drafter so (SeqOutcome::pushed). A push that arrives after the outcome was
// sent is stale and dropped: the drafter then answers the hit as before. Entries are the
// drafter's cache entries uncut (the leader cuts them to the length it asks, as the drafter does).
struct PushedSpec {
  int32_t seq = 0;
  int32_t k = 0;      // the outcome: accepted count
  int32_t bonus = 0;  //              and the token the target emits after them
  std::vector<int32_t> tokens;   // [nodes]
  std::vector<ProcessedDist> q;  // [nodes]
  template <class A> void serialize(A& a) { a(seq, k, bonus, tokens, q); }
  friend bool operator==(const PushedSpec&, const PushedSpec&) = default;
};

struct PrespecPush {
  static constexpr MsgKind kKind = MsgKind::kPrespecPush;
  int64_t round = 0;  // the round whose speculations these branches follow
  std::vector<PushedSpec> entries;
  uint8_t miss_lookup = 0;  // as SpeculationMsg::miss_lookup, as of the round's answer; a push
                            // with no entries only tells a change of it (no answer was sent)
  template <class A> void serialize(A& a) {
    a(round, entries, wire_enum<static_cast<uint8_t>(MissLookup::kBackup)>(miss_lookup));
  }
  friend bool operator==(const PrespecPush&, const PrespecPush&) = default;
};

struct DrafterStatsAsk {
  static constexpr MsgKind kKind = MsgKind::kDrafterStatsAsk;
  template <class A> void serialize(A&) {}
  friend bool operator==(const DrafterStatsAsk&, const DrafterStatsAsk&) = default;
};

// The drafter lead's figures (runtime/saguaro/ssd_drafter_core.h SsdDrafterStats).
struct DrafterStatsMsg {
  static constexpr MsgKind kKind = MsgKind::kDrafterStats;
  int64_t rounds = 0, hits = 0, misses = 0, fallback_primary = 0, fallback_backup = 0;
  std::vector<int64_t> hits_at_k, outcomes_at_k;
  double mal_hit = 0, mal_miss = 0;
  int64_t branches = 0;
  int64_t branches_planned = 0, branches_cached = 0, prespec_cut = 0, predicted = 0;
  double prespec_s = 0, fallback_s = 0, busy_s = 0;
  std::vector<int32_t> fan_out_after_hit, fan_out_after_miss;
  int32_t critical_batch = 0;
  template <class A> void serialize(A& a) {
    a(rounds, hits, misses, fallback_primary, fallback_backup, hits_at_k, outcomes_at_k, mal_hit,
      mal_miss, branches, branches_planned, branches_cached, prespec_cut, predicted, prespec_s,
      fallback_s, busy_s, fan_out_after_hit, fan_out_after_miss, critical_batch);
  }
  friend bool operator==(const DrafterStatsMsg&, const DrafterStatsMsg&) = default;
};

// Sequences that ended (target leader -> drafter lead, relayed to the other drafter ranks).
struct FinishSeqs {
  static constexpr MsgKind kKind = MsgKind::kFinishSeqs;
  std::vector<int32_t> seqs;
  template <class A> void serialize(A& a) { a(seqs); }
  friend bool operator==(const FinishSeqs&, const FinishSeqs&) = default;
};

struct DrafterShutdown {
  static constexpr MsgKind kKind = MsgKind::kDrafterShutdown;
  template <class A> void serialize(A&) {}
  friend bool operator==(const DrafterShutdown&, const DrafterShutdown&) = default;
};

// ---- any link ---------------------------------------------------------------------------------

// A rank failed; the receiver reports it and ends the job.
struct ErrorMsg {
  static constexpr MsgKind kKind = MsgKind::kError;
  int32_t rank = 0;
  Role role = Role::kTarget;
  std::string what;
  template <class A> void serialize(A& a) { a(rank, wire_enum<Role::kDrafter>(role), what); }
  friend bool operator==(const ErrorMsg&, const ErrorMsg&) = default;
};

// A rank's sign of life (actors/roles/heartbeat.h), from a thread of its own: the target leader's
// to the drafter lead while a job with drafter ranks lives, and the drafter lead's to the leader
// from the first StartSeqs with push on. Neither is on the traced timeline.
struct Heartbeat {
  static constexpr MsgKind kKind = MsgKind::kHeartbeat;
  int32_t rank = 0;
  std::string phase;
  int64_t round = 0;
  template <class A> void serialize(A& a) { a(rank, phase, round); }
  friend bool operator==(const Heartbeat&, const Heartbeat&) = default;
};

struct Ping {
  static constexpr MsgKind kKind = MsgKind::kPing;
  uint64_t id = 0;
  template <class A> void serialize(A& a) { a(id); }
  friend bool operator==(const Ping&, const Ping&) = default;
};

struct Pong {
  static constexpr MsgKind kKind = MsgKind::kPong;
  uint64_t id = 0;
  template <class A> void serialize(A& a) { a(id); }
  friend bool operator==(const Pong&, const Pong&) = default;
};

// A message struct: has its kind and a Cereal serialize().
template <class T>
concept Message = requires { { T::kKind } -> std::convertible_to<MsgKind>; };

}  // namespace ssd
