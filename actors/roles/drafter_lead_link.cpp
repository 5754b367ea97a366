#include "actors/roles/drafter_lead_link.h"

#include <fmt/format.h>

#include <iterator>
#include <thread>

#include "runtime/core/error.h"

namespace ssd {

DrafterLeadLink::DrafterLeadLink(Transport& world, const RankLayout& layout, Watchdog& dog,
                                 double step_s)
    : world_(world), layout_(layout), dog_(dog), step_s_(step_s) {}

void DrafterLeadLink::set_leader_lookups(LeaderLookups lookups) {
  lookup_ = std::move(lookups.from_start);
  lookup_at_loss_ = std::move(lookups.at_loss);
}

void DrafterLeadLink::start_batch(StartSeqs& m, std::span<const std::byte> bulk) {
  m.push = m.prespeculate && push_enabled_;
  batch_push_ = m.push;
  push_.reset();  // rounds count from 0 again
  send(m, bulk);
  if (m.push) silence_.expect(monotonic_seconds());  // its heartbeats start with this batch
  else silence_.forget();
}

Envelope DrafterLeadLink::receive(MsgKind kind, const std::string& waiting_for) {
  // Under a continue policy the wait's own deadline decides (a DrafterLost the caller catches);
  // the watchdog only backs it up, later, so the two never race.
  Watchdog::Scope scope(dog_, waiting_for, policy_.continue_on_loss ? 2 * step_s_ + 5 : step_s_);
  for (;;) {
    Envelope env;
    if (!held_.empty()) {
      env = std::move(held_.front());
      held_.pop_front();
    } else {
      std::optional<Envelope> got = spin_for_frame();
      env = got ? std::move(*got)
                : wait_for_drafter(world_, layout_.drafter_lead(), step_s_, policy_, waiting_for);
      bytes_ += static_cast<int64_t>(env.bytes.size());
      heard_from(env);
    }
    if (env.kind == MsgKind::kHeartbeat) continue;
    if (env.kind == MsgKind::kPrespecPush) {  // a push that came late: kept, not used (protocol.h)
      keep_push(env);
      continue;
    }
    if (env.kind == kind) return env;
    if (env.kind == MsgKind::kError) {
      const auto e = decode<ErrorMsg>(env);
      fail(fmt::format("rank {} ({}) failed: {}", e.rank, role_name(e.role), e.what));
    }
    fail(fmt::format("target leader: {} from rank {} while {}", kind_name(env.kind), env.peer,
                     waiting_for));
  }
}

SpeculationMsg DrafterLeadLink::receive_answer(int64_t round) {
  SpeculationMsg answer = decode<SpeculationMsg>(
      receive(MsgKind::kSpeculation,
              fmt::format("waiting for the speculation of round {} from the drafter (rank {})",
                          round, layout_.drafter_lead())));
  miss_lookup_ = static_cast<MissLookup>(answer.miss_lookup);
  return answer;
}

// The leader has nothing to do while it waits for the drafter, and its core is its own: it polls
// without sleeping (yielding the core to anything runnable) for up to kSpinS, since a sleeping
// waiter wakes up tens of microseconds late (the timer's slack) in every round that waits. Longer
// waits (a slow drafter) fall back to the sleeping poll.
std::optional<Envelope> DrafterLeadLink::spin_for_frame() {
  const double end = monotonic_seconds() + kSpinS;
  do {
    if (std::optional<Envelope> env = world_.try_recv()) return env;
    std::this_thread::yield();
  } while (monotonic_seconds() < end);
  return std::nullopt;
}

void DrafterLeadLink::heard_from(const Envelope& env) {
  if (env.peer == layout_.drafter_lead()) silence_.heard(monotonic_seconds());
}

// A round's pre-speculation comes in several pushes, one per chunk as it is drafted (protocol.h,
// PrespecPush): those of one round add up, and another round's replaces them (frames of one
// peer arrive in order, so that is a newer round, or a new batch's once a late push of the
// previous batch is replaced: rounds count from 0 again; sequence ids are unique over the job,
// so a late push of an earlier batch never matches a sequence of this one).
void DrafterLeadLink::keep_push(const Envelope& env) {
  SSD_CHECK(env.peer == layout_.drafter_lead(), "target leader: a PrespecPush from rank {}",
            env.peer);
  PrespecPush p = decode<PrespecPush>(env);
  miss_lookup_ = static_cast<MissLookup>(p.miss_lookup);
  if (push_ && p.round == push_->round) {
    std::move(p.entries.begin(), p.entries.end(), std::back_inserter(push_->entries));
    return;
  }
  push_ = std::move(p);
}

// Pushed hits and misses drafted here let rounds go by without an answer, so no wait's deadline
// would see the drafter lead hang or die; its heartbeats do (heartbeat.h). Called once per round
// after reading every frame that arrived, so a lead that is alive has been heard within a quarter
// of the step.
void DrafterLeadLink::poll(int64_t round) {
  if (!batch_push_ || loss_) return;
  while (std::optional<Envelope> env = world_.try_recv()) {
    bytes_ += static_cast<int64_t>(env->bytes.size());
    heard_from(*env);
    if (env->kind == MsgKind::kHeartbeat) continue;
    if (env->kind == MsgKind::kPrespecPush)
      keep_push(*env);
    else
      held_.push_back(std::move(*env));  // for receive(), in order
  }
  const std::optional<double> silent = silence_.overdue(monotonic_seconds());
  if (!silent) return;
  const int lead = layout_.drafter_lead();
  const std::string what =
      fmt::format("waiting for a heartbeat from the drafter (rank {}) in round {}", lead, round);
  if (!policy_.continue_on_loss)
    fail(fmt::format("rank {} (target) timed out after {:g} s while {} (nothing from it for "
                     "{:.1f} s)",
                     layout_.rank, silence_.deadline_s(), what, *silent));
  throw lost_at_deadline({lead}, silence_.deadline_s(), policy_, what, /*probe_gone=*/true);
}

const PushedSpec* DrafterLeadLink::find_pushed(int64_t round, int32_t seq, int32_t k,
                                               int32_t bonus) const {
  if (!push_ || push_->round != round) return nullptr;
  for (const PushedSpec& e : push_->entries)  // the first of equal keys, as the drafter's cache
    if (e.seq == seq && e.k == k && e.bonus == bonus) return &e;
  return nullptr;
}

// A hit found in the push of `round` (the pre-speculation after the speculations just verified)
// is verified next at once. A miss the drafter would answer with a lookup costs it microseconds
// and the leader a round trip: drafted here instead, with the copy of the lookup the drafter
// named, and sent with the outcome so the drafter adopts it and pre-speculates after it.
std::optional<SeqSpeculation> DrafterLeadLink::ahead(int64_t round, SeqOutcome& o,
                                                     const GenerationRequest& req,
                                                     uint32_t position) {
  if (o.next_k == 0) return std::nullopt;  // a decode step next
  std::optional<SeqSpeculation> d;
  if (loss_) {  // no drafter: the leader's own lookup, if it has one
    d = draft_here(o.seq, o.next_k, req, position);
  } else {
    if (!batch_push_) return std::nullopt;
    if (const PushedSpec* e = find_pushed(round, o.seq, o.accepted, o.emitted.back())) {
      o.pushed = true;
      return SeqSpeculation{o.seq, static_cast<uint8_t>(SpecSource::kCache), e->tokens, e->q};
    }
    if (lookup_ && lookup_->can_draft(miss_lookup_))
      d = lookup_->draft(miss_lookup_, o.seq, o.next_k, req.sampler, req.stream, position);
  }
  if (!d) return std::nullopt;
  o.leader_drafted = true;
  o.drafted = *d;
  return d;
}

bool DrafterLeadLink::drafts_after_loss() const {
  return lookup_ && lookup_->own_choice() != MissLookup::kNone;
}

std::optional<SeqSpeculation> DrafterLeadLink::draft_here(int32_t seq, int32_t k,
                                                          const GenerationRequest& req,
                                                          uint32_t position) {
  if (!drafts_after_loss()) return std::nullopt;
  return lookup_->draft(lookup_->own_choice(), seq, k, req.sampler, req.stream, position);
}

std::optional<std::vector<size_t>> DrafterLeadLink::speculate_without_drafter(
    RoundSpeculations& specs, std::span<const Awaiting> seqs) {
  if (!drafts_after_loss()) {
    specs.take_none();
    return std::nullopt;
  }
  std::vector<size_t> drafted;
  for (size_t j = 0; j < seqs.size(); ++j) {
    const Awaiting& a = seqs[j];
    if (!specs.awaits(a.seq)) continue;
    std::optional<SeqSpeculation> d = draft_here(a.seq, a.k, *a.req, a.position);
    SSD_CHECK(d.has_value(), "the target leader has no lookup to draft sequence {} with", a.seq);
    specs.give(a.seq, std::move(*d));
    drafted.push_back(j);
  }
  return drafted;
}

void DrafterLeadLink::set_memory_scope(uint64_t scope) {
  memory_scope_ = scope;
  if (lookup_) lookup_->set_memory_scope(scope);
}

void DrafterLeadLink::started(int32_t seq, std::span<const int32_t> prompt,
                              std::span<const int32_t> emitted) {
  if (lookup_) lookup_->start(seq, prompt, emitted);
}

void DrafterLeadLink::committed(int32_t seq, std::span<const int32_t> tokens) {
  if (lookup_) lookup_->commit(seq, tokens);
}

void DrafterLeadLink::finished(int32_t seq) {
  if (lookup_) lookup_->finish(seq);
}

// The copy the job's recipe builds, started on every running sequence as the copy held from the
// start would have been: its prompt, then every token it emitted (a lookup's state is its
// context, so the two draft alike; a suffix drafter's memory of earlier requests starts empty).
void DrafterLeadLink::build_lookup(std::span<const RunningSeq> running) {
  if (lookup_ || !lookup_at_loss_) return;
  lookup_ = lookup_at_loss_();
  if (!lookup_) return;
  lookup_->set_memory_scope(memory_scope_);
  for (const RunningSeq& r : running) lookup_->start(r.seq, r.prompt, r.emitted);
}

void DrafterLeadLink::note_loss(const DrafterLoss& loss) {
  if (loss_) return;
  loss_ = loss;
  build_lookup({});
}

bool DrafterLeadLink::lose(const DrafterLost& e, int64_t round,
                           std::span<const RunningSeq> running) {
  if (loss_) return false;
  build_lookup(running);
  const std::string fallback =
      drafts_after_loss()
          ? lookup_fallback(lookup_->kind(lookup_->own_choice()))
          : std::string(kPlainDecoding);
  loss_ = DrafterLoss{e.rank, round, e.died, e.cause, fallback};
  report_loss(*loss_);
  return true;
}

}  // namespace ssd
