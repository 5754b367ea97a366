// The start-up warm-up (see forward_warmup.h): the size sets, and the forwards on scratch
// sequences.
#include "runtime/model/forward_warmup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "runtime/core/error.h"
#include "runtime/model/target_model.h"
#include "runtime/model/transformer.h"

namespace ssd {
namespace {

std::vector<int64_t> sorted_within(std::vector<int64_t> v, int64_t max_rows) {
  std::erase_if(v, [&](int64_t n) { return n < 1 || n > max_rows; });
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Room for one scratch sequence of n positions.
int64_t room(const Transformer& model, const KvCache& kv) {
  return std::min<int64_t>(model.config().context_length, kv.capacity_tokens());
}

// A scratch sequence of a site (through site.via when set), released on every exit path.
class ScratchSeq {
 public:
  explicit ScratchSeq(const WarmupSite& s)
      : s_(s), seq_(s.via ? s.via->create_seq() : s.kv->create()) {}
  ~ScratchSeq() {
    if (s_.via)
      s_.via->release_seq(seq_);
    else
      s_.kv->release(seq_);
  }
  ScratchSeq(const ScratchSeq&) = delete;
  ScratchSeq& operator=(const ScratchSeq&) = delete;

  // One forward of n rows on the sequence (cached length 0), logits for every row (left in
  // backend memory: nobody reads them) and the given hidden layers, then the sequence truncated
  // back to 0.
  void forward(int64_t n, bool all_logits, const std::vector<int32_t>& hidden) {
    Batch b =
        Batch::sequence(seq_, std::vector<int32_t>(static_cast<size_t>(n), 0), 0, all_logits);
    b.logits_in_backend = true;
    b.hidden_layers = hidden;
    if (s_.via) {
      s_.via->forward(b);
      s_.via->truncate(seq_, 0);
    } else {
      s_.model->forward(b, *s_.kv);
      s_.kv->truncate(seq_, 0);
    }
  }

 private:
  const WarmupSite& s_;
  SeqId seq_;
};

}  // namespace

namespace {

// Verification forwards of b full drafts at each k, b = 1..max_batch (checks the plan).
std::vector<int64_t> verify_sizes(const WarmupPlan& p) {
  SSD_CHECK(p.max_batch >= 1 && p.width >= 1, "warm-up: batch {}, width {} (need >= 1)",
            p.max_batch, p.width);
  std::vector<int64_t> v;
  for (int64_t b = 1; b <= p.max_batch; ++b)
    for (int32_t k : p.ks) {
      SSD_CHECK(k >= 1, "warm-up: draft depth {} (need >= 1)", k);
      v.push_back(b * (1 + int64_t{p.width} * k));
    }
  return v;
}

}  // namespace

std::vector<int64_t> target_warmup_sizes(const WarmupPlan& p) {
  std::vector<int64_t> v = verify_sizes(p);
  if (!p.plain_verify) v.clear();
  for (int64_t b = 1; b <= p.max_batch; ++b) v.push_back(b);
  return sorted_within(std::move(v), p.max_rows);
}

std::vector<int64_t> target_feature_sizes(const WarmupPlan& p) {
  std::vector<int64_t> v = verify_sizes(p);
  if (p.feature_layers.empty()) v.clear();
  return sorted_within(std::move(v), p.max_rows);
}

std::vector<int64_t> drafter_warmup_sizes(const WarmupPlan& p) {
  SSD_CHECK(p.max_batch >= 1 && p.width >= 1, "warm-up: batch {}, width {} (need >= 1)",
            p.max_batch, p.width);
  std::vector<int64_t> v;
  if (std::any_of(p.ks.begin(), p.ks.end(), [](int32_t k) { return k >= 2; }))
    for (int64_t b = 1; b <= p.max_batch; ++b) v.push_back(b * p.width);
  return sorted_within(std::move(v), p.max_rows);
}

std::string describe_sizes(const std::vector<int64_t>& sizes) {
  std::string s;
  for (size_t i = 0; i < sizes.size();) {
    size_t j = i;
    while (j + 1 < sizes.size() && sizes[j + 1] == sizes[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(sizes[i]);
    if (j > i) {
      s += j == i + 1 ? ',' : '-';
      s += std::to_string(sizes[j]);
    }
    i = j + 1;
  }
  return s;
}

WarmupResult warm_up_forwards(std::span<const WarmupSite> sites) {
  WarmupResult r;
  const auto t0 = std::chrono::steady_clock::now();
  // Buffers to their final size first, on every site (they may share one backend).
  for (const WarmupSite& s : sites) {
    const int64_t n = std::min(s.grow_rows, room(*s.model, *s.kv));
    if (n < 1) continue;
    ScratchSeq seq(s);
    seq.forward(n, /*all_logits=*/false,
                s.hidden_sizes.empty() ? std::vector<int32_t>{} : s.hidden_layers);
    ++r.forwards;
  }
  // Then each size twice, largest first (with and without hidden layers: the buffer of the
  // hidden copies grows with the rows too).
  for (const WarmupSite& s : sites) {
    struct Job {
      int64_t n;
      bool hidden;
    };
    std::vector<Job> jobs;
    for (int64_t n : s.sizes) jobs.push_back({n, false});
    if (!s.hidden_layers.empty())
      for (int64_t n : s.hidden_sizes) jobs.push_back({n, true});
    std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.n > b.n; });
    std::vector<int64_t> ran, ran_hidden;
    ScratchSeq seq(s);
    for (const Job& j : jobs) {
      if (j.n < 1 || j.n > room(*s.model, *s.kv)) continue;
      for (int rep = 0; rep < 2; ++rep)
        seq.forward(j.n, true, j.hidden ? s.hidden_layers : std::vector<int32_t>{});
      r.forwards += 2;
      (j.hidden ? ran_hidden : ran).push_back(j.n);
    }
    if (ran.empty() && ran_hidden.empty()) continue;
    std::sort(ran.begin(), ran.end());
    std::sort(ran_hidden.begin(), ran_hidden.end());
    if (!r.summary.empty()) r.summary += " + ";
    r.summary += s.what + " " + describe_sizes(ran);
    if (!ran_hidden.empty())
      r.summary += fmt::format("{}{} (hidden {})", ran.empty() ? "" : ",",
                               describe_sizes(ran_hidden), fmt::join(s.hidden_layers, ","));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ssd
