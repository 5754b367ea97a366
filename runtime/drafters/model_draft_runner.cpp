#include "runtime/drafters/model_draft_runner.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd {

ProcessedDist without_tokens(const ProcessedDist& q, std::span<const int32_t> removed) {
  ProcessedDist out;
  double mass = 0;
  for (const TokenProb& tp : q.tokens) {
    if (std::find(removed.begin(), removed.end(), tp.id) != removed.end()) continue;
    out.tokens.push_back(tp);
    mass += tp.prob;
  }
  // Summed over what is left rather than 1 - removed mass, so a nearly exhausted q still sums to
  // 1 to rounding (verify.h insists on it).
  if (mass <= 0) return ProcessedDist{};
  for (TokenProb& tp : out.tokens) tp.prob /= mass;
  return out;
}

ModelDraftRunner::ModelDraftRunner(Transformer& model, int64_t kv_tokens, int64_t prefill_chunk,
                                   std::string who)
    : model_(model),
      kv_(model.kv_config(kv_tokens > 0 ? kv_tokens : model.config().context_length + 1024)),
      prefill_chunk_(prefill_chunk),
      context_limit_(model.config().context_length),
      who_(std::move(who)) {
  SSD_CHECK(prefill_chunk >= 1, "{}: prefill chunk {} must be positive", who_, prefill_chunk);
  SSD_CHECK(kv_tokens >= 0, "{}: KV capacity {} must not be negative", who_, kv_tokens);
}

ModelDraftRunner::~ModelDraftRunner() = default;

ModelDraftRunner::SeqState& ModelDraftRunner::state(int32_t seq) {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "{}: sequence {} was not started", who_, seq);
  return it->second;
}

int64_t ModelDraftRunner::cached(int32_t seq) const {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "{}: sequence {} was not started", who_, seq);
  return it->second.cached;
}

const std::vector<int32_t>& ModelDraftRunner::context(int32_t seq) const {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "{}: sequence {} was not started", who_, seq);
  return it->second.context;
}

void ModelDraftRunner::start(int32_t seq, std::span<const int32_t> prompt) {
  finish(seq);  // a restarted sequence begins afresh
  SeqState s;
  s.context.assign(prompt.begin(), prompt.end());
  s.kv = kv_.create();
  seqs_.emplace(seq, std::move(s));
}

void ModelDraftRunner::commit(int32_t seq, std::span<const int32_t> tokens) {
  SeqState& s = state(seq);
  s.context.insert(s.context.end(), tokens.begin(), tokens.end());
}

void ModelDraftRunner::finish(int32_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  if (kv_.alive(it->second.kv)) kv_.release(it->second.kv);
  seqs_.erase(it);
}

ForwardResult ModelDraftRunner::forward(const Batch& b) {
  try {
    return model_.forward(b, kv_);
  } catch (const Error& e) {  // e.g. the drafter's own cache is full: say whose cache it is
    throw Error(who_ + ": " + e.what());
  }
}

ForwardResult ModelDraftRunner::step(Batch& b, DraftPolicy& policy) {
  const bool want_hidden = policy.wants_hidden();
  if (want_hidden) b.hidden_layers = {static_cast<int32_t>(model_.layers() - 1)};
  ForwardResult fr = forward(b);
  const int64_t m = static_cast<int64_t>(b.logits_rows.size());
  const int64_t dim = model_.config().dim;
  std::vector<float> hidden;  // [m, dim] the drafted rows only
  if (want_hidden) {
    hidden.resize(static_cast<size_t>(m * dim));
    for (int64_t a = 0; a < m; ++a)
      std::copy_n(fr.hidden.at(0).data() + b.logits_rows[a] * dim, dim, hidden.data() + a * dim);
  }
  policy.prepare(hidden, fr.logits, m);
  return fr;
}

void ModelDraftRunner::catch_up(SeqState& s, int64_t upto) {
  while (s.cached < upto) {
    const int64_t end = std::min(upto, s.cached + prefill_chunk_);
    std::vector<int32_t> chunk(s.context.begin() + s.cached, s.context.begin() + end);
    Batch b = Batch::sequence(s.kv, chunk, static_cast<int32_t>(s.cached));
    b.logits_rows.clear();
    forward(b);
    s.cached = end;
  }
}

namespace {

// One request's drafting state inside a draft() call.
struct Work {
  size_t req = 0;
  int64_t n = 0;         // committed tokens
  int64_t base_pos = 0;  // position of the depth-1 token: n + |suffix|
  int32_t k = 0;         // depth after the context limit
  bool primary = false;  // works on the committed cache itself
  SeqId base = -1;
  std::vector<SeqId> branches;                 // [branches] KV sequence of each branch
  std::vector<std::vector<DraftPick>> picks;   // [branches][depth]
};

void push_row(Batch& b, int32_t token, int64_t pos, SeqId seq) {
  b.tokens.push_back(token);
  b.positions.push_back(static_cast<int32_t>(pos));
  b.seqs.push_back(seq);
}

}  // namespace

std::vector<DraftTree> ModelDraftRunner::draft(std::span<const DraftRequest> requests,
                                               DraftPolicy& policy) {
  const int32_t vocab = static_cast<int32_t>(model_.config().vocab);
  std::vector<DraftTree> trees(requests.size());
  std::vector<Work> work;
  std::map<int32_t, int32_t> users;  // seq -> active requests in this call
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    SSD_CHECK(r.k >= 0 && r.k <= 64, "{}: draft depth k = {} must be in 0..64", who_, r.k);
    SSD_CHECK(r.width >= 1 && r.width <= 16, "{}: draft width {} must be in 1..16", who_, r.width);
    for (int32_t t : r.suffix)
      SSD_CHECK(t >= 0 && t < vocab, "{}: suffix token {} is outside the vocabulary of {}", who_, t,
                vocab);
    const SeqState& s = state(r.seq);
    Work w;
    w.req = i;
    w.n = static_cast<int64_t>(s.context.size());
    w.base_pos = w.n + static_cast<int64_t>(r.suffix.size());
    // The deepest token forwarded sits at base_pos + k - 2 and must be < context_limit_.
    w.k = static_cast<int32_t>(std::min<int64_t>(r.k, context_limit_ - w.base_pos + 1));
    if (w.n == 0 || w.k <= 0) continue;  // nothing to condition on, or out of context: no draft
    users[r.seq]++;
    work.push_back(std::move(w));
  }
  if (work.empty()) return trees;

  // Catch-ups that cannot ride along in step 0: a long backlog, or a sequence several requests
  // fork from (their forks must see the committed tokens).
  for (const Work& w : work) {
    const DraftRequest& r = requests[w.req];
    SeqState& s = state(r.seq);
    const int64_t pending = w.n - 1 - s.cached;
    if (pending > 0 && (pending > prefill_chunk_ || users[r.seq] > 1)) catch_up(s, w.n - 1);
  }

  // Forks to release and committed caches to truncate back, whatever happens below.
  std::vector<SeqId> forks;
  std::vector<SeqState*> primaries;
  struct Cleanup {
    KvCache& kv;
    std::vector<SeqId>& forks;
    std::vector<SeqState*>& primaries;
    ~Cleanup() {
      for (SeqId f : forks)
        if (kv.alive(f)) kv.release(f);
      for (SeqState* s : primaries)
        if (kv.length(s->kv) > s->cached) kv.truncate(s->kv, s->cached);
    }
  } cleanup{kv_, forks, primaries};

  // Step 0: catch-up + last committed token + suffix of every request, one forward.
  Batch b;
  for (Work& w : work) {
    const DraftRequest& r = requests[w.req];
    SeqState& s = state(r.seq);
    w.primary = std::find(primaries.begin(), primaries.end(), &s) == primaries.end();
    if (w.primary) {
      primaries.push_back(&s);
      w.base = s.kv;
    } else {
      w.base = kv_.fork(s.kv);  // before the forward: it must not see the primary's rows
      forks.push_back(w.base);
    }
    for (int64_t p = s.cached; p < w.n; ++p) push_row(b, s.context[p], p, w.base);
    for (size_t j = 0; j < r.suffix.size(); ++j) push_row(b, r.suffix[j], w.n + j, w.base);
    b.logits_rows.push_back(static_cast<int32_t>(b.size()) - 1);
  }
  ForwardResult fr = step(b, policy);
  for (const Work& w : work)
    if (w.primary) state(requests[w.req].seq).cached = w.n - 1;  // the catch-up rows stay

  for (size_t a = 0; a < work.size(); ++a) {
    Work& w = work[a];
    const DraftRequest& r = requests[w.req];
    std::vector<DraftPick> first = policy.first(fr.logits_row(a), vocab, r, r.width);
    SSD_CHECK(!first.empty() && static_cast<int32_t>(first.size()) <= r.width,
              "{}: the draft policy returned {} first-level tokens for width {}", who_,
              first.size(), r.width);
    for (size_t j = 0; j < first.size(); ++j) {
      SeqId br = w.base;
      if (j > 0) {
        br = kv_.fork(w.base);  // shares context + suffix; branches diverge from here
        forks.push_back(br);
      }
      w.branches.push_back(br);
      w.picks.push_back({std::move(first[j])});
    }
  }

  // Steps 1..k-1: the newest token of every branch of every request, one forward per depth.
  int32_t max_k = 0;
  for (const Work& w : work) max_k = std::max(max_k, w.k);
  for (int32_t depth = 2; depth <= max_k; ++depth) {
    Batch nb;
    for (const Work& w : work) {
      if (w.k < depth) continue;
      for (size_t j = 0; j < w.branches.size(); ++j) {
        push_row(nb, w.picks[j].back().token, w.base_pos + depth - 2, w.branches[j]);
        nb.logits_rows.push_back(static_cast<int32_t>(nb.size()) - 1);
      }
    }
    fr = step(nb, policy);
    size_t row = 0;
    for (Work& w : work) {
      if (w.k < depth) continue;
      for (size_t j = 0; j < w.branches.size(); ++j)
        w.picks[j].push_back(policy.next(fr.logits_row(row++), vocab, requests[w.req],
                                         static_cast<int32_t>(j), depth));
    }
  }

  // Branch by branch, so the first-level siblings keep their drawing order among the root's
  // children (verification tries them in index order).
  for (Work& w : work) {
    DraftTree& t = trees[w.req];
    const bool predict = requests[w.req].predict_top > 0;
    for (auto& branch : w.picks) {
      int32_t parent = -1;
      for (DraftPick& p : branch) {
        parent = t.add(parent, p.token, std::move(p.q));
        if (predict) t.predicted.push_back(std::move(p.predicted));
      }
    }
  }
  return trees;
}

}  // namespace ssd
