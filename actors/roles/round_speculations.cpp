#include "actors/roles/round_speculations.h"

#include <algorithm>

#include "actors/roles/drafter_wire.h"
#include "runtime/core/error.h"

namespace ssd {

void RoundSpeculations::ask(int32_t seq, int32_t length) {
  SSD_CHECK(length >= 0 && length <= k_max_, "round {}: length {} asked of sequence {}; --k is {}",
            round_, length, seq, k_max_);
  const auto [it, added] = seqs_.try_emplace(seq);
  SSD_CHECK(added, "round {}: sequence {} asked twice", round_, seq);
  it->second.length = length;
  asked_ += length;
  if (length > 0) {
    ++awaited_;
    return;
  }
  // A decode step: the drafter sends nothing for it.
  it->second.spec.seq = seq;
  it->second.spec.source = static_cast<uint8_t>(SpecSource::kDecodeStep);
  it->second.taken = true;
}

void RoundSpeculations::take(SpeculationMsg&& answer, bool drop_unasked) {
  SSD_CHECK(answer.round == round_, "drafter answered round {} while the target is at round {}",
            answer.round, round_);
  for (SeqSpeculation& w : answer.seqs) {
    const auto it = seqs_.find(w.seq);
    if (it == seqs_.end() && drop_unasked) continue;
    SSD_CHECK(it != seqs_.end(), "drafter sent a speculation for sequence {}, which is not running",
              w.seq);
    SSD_CHECK(it->second.length > 0,
              "drafter sent a speculation for sequence {} in round {}, whose length is 0 (a "
              "decode step)",
              w.seq, round_);
    SSD_CHECK(!it->second.taken, "drafter sent two speculations for sequence {} in round {}",
              w.seq, round_);
    it->second.spec = std::move(w);
    it->second.taken = true;
    --awaited_;
  }
}

bool RoundSpeculations::awaits(int32_t seq) const {
  const auto it = seqs_.find(seq);
  return it != seqs_.end() && it->second.length > 0 && !it->second.taken;
}

void RoundSpeculations::give(int32_t seq, SeqSpeculation&& spec) {
  Entry& e = entry(seq);
  SSD_CHECK(e.length > 0 && !e.taken,
            "round {}: speculation given ahead for sequence {}, which has one or is a decode step",
            round_, seq);
  e.spec = std::move(spec);
  e.spec.seq = seq;
  e.taken = true;
  --awaited_;
}

void RoundSpeculations::take_none() {
  asked_ = 0;  // nobody drafts
  awaited_ = 0;
  for (auto& [seq, e] : seqs_) {
    e.spec = SeqSpeculation{};
    e.spec.seq = seq;
    e.length = 0;
    e.taken = true;
  }
}

RoundSpeculations::Entry& RoundSpeculations::entry(int32_t seq) {
  const auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "round {}: sequence {} was not asked for a speculation", round_,
            seq);
  return it->second;
}

const RoundSpeculations::Entry& RoundSpeculations::entry(int32_t seq) const {
  return const_cast<RoundSpeculations*>(this)->entry(seq);
}

DraftTree RoundSpeculations::tree(int32_t seq, int64_t left) {
  Entry& e = entry(seq);
  SSD_CHECK(e.taken, "the drafter sent no speculation for sequence {} in round {}", seq, round_);
  SeqSpeculation& sp = e.spec;
  const size_t depth = static_cast<size_t>(std::clamp<int64_t>(left - 1, 0, e.length));
  if (sp.tokens.size() > depth) {
    sp.tokens.resize(depth);
    sp.q.resize(depth);
  }
  DraftTree tree = tree_of(sp);  // within --k: the length asked is (ask())
  tree.validate(vocab_);
  return tree;
}

SpecSource RoundSpeculations::source(int32_t seq) const {
  return static_cast<SpecSource>(entry(seq).spec.source);
}

}  // namespace ssd
