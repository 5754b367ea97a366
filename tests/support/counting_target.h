// A TargetModel that passes every call to another one and records the forwards it saw (rows,
// distinct sequences, whether a mask was given), so that tests can check how drivers use the
// target: one forward per round over every active sequence, nothing after a request finishes.
#pragma once

#include <set>
#include <vector>

#include "runtime/model/target_model.h"

namespace ssd::test {

class CountingTarget final : public TargetModel {
 public:
  struct Call {
    size_t rows = 0;
    size_t seqs = 0;  // distinct KV sequences in the batch
    bool masked = false;
  };

  explicit CountingTarget(TargetModel& inner) : inner_(inner) {}

  const ModelConfig& config() const override { return inner_.config(); }
  ForwardResult forward(const Batch& b) override {
    calls.push_back({b.size(), std::set<SeqId>(b.seqs.begin(), b.seqs.end()).size(),
                     !b.mask.empty()});
    return inner_.forward(b);
  }
  SeqId create_seq() override { return inner_.create_seq(); }
  void release_seq(SeqId s) override {
    released++;
    inner_.release_seq(s);
  }
  int64_t seq_length(SeqId s) const override { return inner_.seq_length(s); }
  void truncate(SeqId s, int64_t n) override { inner_.truncate(s, n); }
  void compact(SeqId s, int64_t start, std::span<const int32_t> keep) override {
    compactions++;
    inner_.compact(s, start, keep);
  }
  KvCapacity capacity() const override { return inner_.capacity(); }

  // Forwards with a mask: the verification rounds (prefill and AR steps are causal).
  std::vector<Call> masked_calls() const {
    std::vector<Call> out;
    for (const Call& c : calls)
      if (c.masked) out.push_back(c);
    return out;
  }

  std::vector<Call> calls;
  int64_t released = 0;
  int64_t compactions = 0;

 private:
  TargetModel& inner_;
};

}  // namespace ssd::test
