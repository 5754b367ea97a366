#include "actors/roles/leader_lookup.h"

#include "runtime/core/error.h"

namespace ssd {

LeaderLookup::LeaderLookup(std::unique_ptr<Drafter> primary, std::unique_ptr<Drafter> backup)
    : primary_(std::move(primary)), backup_(std::move(backup)) {
  for (const Drafter* d : {primary_.get(), backup_.get()})
    SSD_CHECK(!d || d->drafts_cheaply(),
              "the target leader drafts misses only with a lookup drafter, not {}", d->name());
}

Drafter* LeaderLookup::drafter(MissLookup which) const {
  switch (which) {
    case MissLookup::kPrimary: return primary_.get();
    case MissLookup::kBackup: return backup_.get();
    case MissLookup::kNone: return nullptr;
  }
  return nullptr;
}

MissLookup LeaderLookup::own_choice() const {
  if (primary_) return MissLookup::kPrimary;
  return backup_ ? MissLookup::kBackup : MissLookup::kNone;
}

std::string lookup_kind(const Drafter& d) {
  const std::string name = d.name();  // "ngram:1-3", "suffix"
  const std::string base = name.substr(0, name.find(':'));
  return base == "ngram" ? "n-gram" : base;
}

std::string LeaderLookup::kind(MissLookup which) const {
  const Drafter* d = drafter(which);
  return d ? lookup_kind(*d) : "";
}

void LeaderLookup::set_memory_scope(uint64_t scope) {
  for (Drafter* d : {primary_.get(), backup_.get()})
    if (d) d->set_memory_scope(scope);
}

void LeaderLookup::start(int32_t seq, std::span<const int32_t> prompt,
                         std::span<const int32_t> emitted) {
  for (Drafter* d : {primary_.get(), backup_.get()}) {
    if (!d) continue;
    d->start(seq, prompt);
    if (!emitted.empty()) d->commit(seq, emitted);
  }
}

void LeaderLookup::commit(int32_t seq, std::span<const int32_t> tokens) {
  for (Drafter* d : {primary_.get(), backup_.get()})
    if (d) d->commit(seq, tokens);
}

void LeaderLookup::finish(int32_t seq) {
  for (Drafter* d : {primary_.get(), backup_.get()})
    if (d) d->finish(seq);
}

std::optional<SeqSpeculation> LeaderLookup::draft(MissLookup which, int32_t seq, int32_t k,
                                                  const SamplerConfig& sampler, uint64_t stream,
                                                  uint32_t position) {
  Drafter* d = drafter(which);
  if (!d) return std::nullopt;
  SSD_CHECK(k >= 1, "the target leader drafts a speculation of {} tokens (at least 1)", k);
  DraftRequest r;
  r.seq = seq;
  r.k = k;
  r.sampler = sampler;
  r.stream = stream;
  r.position = position;
  std::vector<DraftTree> trees = d->draft(std::span<const DraftRequest>(&r, 1));
  SSD_CHECK(trees.size() == 1 && trees[0].is_chain(),
            "the target leader's {} returned no chain for sequence {}", d->name(), seq);
  DraftTree& t = trees[0];
  const size_t n = std::min(t.tokens.size(), static_cast<size_t>(k));
  SeqSpeculation s;
  s.seq = seq;
  s.source = static_cast<uint8_t>(which == MissLookup::kPrimary ? SpecSource::kPrimary
                                                                 : SpecSource::kBackup);
  s.tokens.assign(t.tokens.begin(), t.tokens.begin() + static_cast<std::ptrdiff_t>(n));
  s.q.assign(t.q.begin(), t.q.begin() + static_cast<std::ptrdiff_t>(n));
  return s;
}

}  // namespace ssd
