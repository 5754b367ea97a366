#include "runtime/drafters/early_exit_drafter.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/core/error.h"

namespace ssd {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void push_row(Batch& b, int32_t token, int64_t pos, SeqId seq) {
  b.tokens.push_back(token);
  b.positions.push_back(static_cast<int32_t>(pos));
  b.seqs.push_back(seq);
}

// log softmax(l)[token] at temperature 1 over the whole row.
float log_prob(const float* l, int64_t vocab, int32_t token) {
  double m = l[0];
  for (int64_t v = 1; v < vocab; ++v) m = std::max<double>(m, l[v]);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v]) - m);
  return static_cast<float>(static_cast<double>(l[token]) - m - std::log(sum));
}

}  // namespace

// One request's drafting state inside a draft() call.
struct EarlyExitDrafter::Work {
  size_t req = 0;
  int64_t n = 0;         // committed tokens
  int64_t base_pos = 0;  // position of the depth-1 token: n + |suffix|
  int32_t k = 0;         // depth after the context limit
  bool primary = false;  // works on the committed cache itself
  SeqId kv = -1;
  int32_t last = 0;      // the token the next draft token follows
  int32_t row = 0;       // batch row of this request's newest token in the current forward
  DraftTree tree;
  PendingDraft rec;
};

EarlyExitDrafter::EarlyExitDrafter(const ModelFile& target, Backend& backend,
                                   const EarlyExitOptions& opts)
    : opts_(opts),
      cfg_(target.config()),
      head_(target.config().dim, target.config().vocab, opts.lora) {
  SSD_CHECK(opts.layers >= 1 && opts.layers <= cfg_.n_layers,
            "early-exit drafter: L = {} must be in 1..{} (the layers of {})", opts.layers,
            cfg_.n_layers, target.path());
  SSD_CHECK(opts.kv_tokens >= 0, "early-exit drafter: KV capacity {} must not be negative",
            opts.kv_tokens);
  SSD_CHECK(opts.prefill_chunk >= 1, "early-exit drafter: prefill chunk {} must be positive",
            opts.prefill_chunk);
  model_ = std::make_unique<Transformer>(target, backend, opts.layers);
  SSD_CHECK(model_->lm_head().rows == cfg_.vocab && model_->lm_head().cols == cfg_.dim,
            "early-exit drafter: LM head of {} is [{}, {}], expected [{}, {}]", target.path(),
            model_->lm_head().rows, model_->lm_head().cols, cfg_.vocab, cfg_.dim);
  kv_ = std::make_unique<KvCache>(
      model_->kv_config(opts.kv_tokens > 0 ? opts.kv_tokens : cfg_.context_length + 1024));
  context_limit_ = cfg_.context_length;
  if (opts.online_learning) trainer_ = std::make_unique<DviTrainer>(head_, opts.dvi);
}

EarlyExitDrafter::~EarlyExitDrafter() = default;

std::string EarlyExitDrafter::name() const {
  return "early-exit:" + std::to_string(model_->layers()) + (trainer_ ? "+dvi" : "");
}

EarlyExitDrafter::SeqState& EarlyExitDrafter::state(int32_t seq) {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "early-exit drafter: sequence {} was not started", seq);
  return it->second;
}

void EarlyExitDrafter::start(int32_t seq, std::span<const int32_t> prompt) {
  finish(seq);  // a restarted sequence begins afresh
  SeqState s;
  s.context.assign(prompt.begin(), prompt.end());
  s.kv = kv_->create();
  seqs_.emplace(seq, std::move(s));
}

void EarlyExitDrafter::commit(int32_t seq, std::span<const int32_t> tokens) {
  SeqState& s = state(seq);
  s.context.insert(s.context.end(), tokens.begin(), tokens.end());
}

void EarlyExitDrafter::finish(int32_t seq) {
  pending_.erase(seq);
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  if (kv_->alive(it->second.kv)) kv_->release(it->second.kv);
  seqs_.erase(it);
}

void EarlyExitDrafter::catch_up(SeqState& s, int64_t upto) {
  while (s.cached < upto) {
    const int64_t end = std::min(upto, s.cached + opts_.prefill_chunk);
    std::vector<int32_t> chunk(s.context.begin() + s.cached, s.context.begin() + end);
    Batch b = Batch::sequence(s.kv, chunk, static_cast<int32_t>(s.cached));
    b.logits_rows.clear();
    model_->forward(b, *kv_);
    s.cached = end;
  }
}

void EarlyExitDrafter::normalise(float* h, int64_t n) {
  model_->backend().rmsnorm(h, model_->output_norm().data(), h, n, cfg_.dim, cfg_.rms_eps);
}

std::vector<float> EarlyExitDrafter::head_logits(std::span<const float> h, int64_t n) {
  SSD_CHECK(static_cast<int64_t>(h.size()) == n * cfg_.dim,
            "early-exit head: {} hidden values for {} rows of dim {}", h.size(), n, cfg_.dim);
  std::vector<float> z(h.begin(), h.end());  // [n, dim]
  normalise(z.data(), n);
  std::vector<float> logits(static_cast<size_t>(n * cfg_.vocab));  // [n, vocab]
  model_->backend().matmul(model_->lm_head(), z.data(), logits.data(), n);
  head_.add_correction(z.data(), logits.data(), n);
  return logits;
}

std::vector<float> EarlyExitDrafter::hidden_of(std::span<const int32_t> tokens) {
  const SeqId s = kv_->create();
  struct Release {
    KvCache& kv;
    SeqId s;
    ~Release() { kv.release(s); }
  } release{*kv_, s};
  Batch b = Batch::sequence(s, std::vector<int32_t>(tokens.begin(), tokens.end()), 0);
  b.logits_rows.clear();
  b.hidden_layers = {static_cast<int32_t>(model_->layers() - 1)};
  return model_->forward(b, *kv_).hidden.at(0);
}

std::vector<DraftTree> EarlyExitDrafter::draft(std::span<const DraftRequest> requests) {
  const int32_t vocab = static_cast<int32_t>(cfg_.vocab);
  const int64_t dim = cfg_.dim;
  std::vector<DraftTree> trees(requests.size());
  std::vector<Work> work;
  std::map<int32_t, int32_t> users;  // seq -> active requests in this call
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    SSD_CHECK(r.k >= 0 && r.k <= 64, "early-exit drafter: draft depth k = {} must be in 0..64", r.k);
    for (int32_t t : r.suffix)
      SSD_CHECK(t >= 0 && t < vocab, "early-exit drafter: suffix token {} is outside the vocabulary of {}",
                t, vocab);
    pending_.erase(r.seq);  // a new draft supersedes what the last one left for observe()
    const SeqState& s = state(r.seq);
    Work w;
    w.req = i;
    w.n = static_cast<int64_t>(s.context.size());
    w.base_pos = w.n + static_cast<int64_t>(r.suffix.size());
    // The deepest token forwarded sits at base_pos + k - 2 and must be < context_limit_.
    w.k = static_cast<int32_t>(std::min<int64_t>(r.k, context_limit_ - w.base_pos + 1));
    if (w.n == 0 || w.k <= 0) continue;  // nothing to condition on, or out of context: no draft
    w.last = r.suffix.empty() ? s.context.back() : r.suffix.back();
    users[r.seq]++;
    work.push_back(std::move(w));
  }
  if (work.empty()) return trees;

  // Catch-ups that cannot ride along in step 0: a long backlog, or a sequence several requests
  // fork from (the forks must see the committed tokens).
  for (const Work& w : work) {
    SeqState& s = state(requests[w.req].seq);
    const int64_t pending = w.n - 1 - s.cached;
    if (pending > 0 && (pending > opts_.prefill_chunk || users[requests[w.req].seq] > 1))
      catch_up(s, w.n - 1);
  }

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
  } cleanup{*kv_, forks, primaries};

  // Step 0 rows: catch-up + last committed token + suffix of every request.
  Batch b;
  for (Work& w : work) {
    const DraftRequest& r = requests[w.req];
    SeqState& s = state(r.seq);
    w.primary = std::find(primaries.begin(), primaries.end(), &s) == primaries.end();
    if (w.primary) {
      primaries.push_back(&s);
      w.kv = s.kv;
    } else {
      w.kv = kv_->fork(s.kv);  // before the forward: it must not see the primary's rows
      forks.push_back(w.kv);
    }
    for (int64_t p = s.cached; p < w.n; ++p) push_row(b, s.context[p], p, w.kv);
    for (size_t j = 0; j < r.suffix.size(); ++j) push_row(b, r.suffix[j], w.n + j, w.kv);
    w.row = static_cast<int32_t>(b.size()) - 1;
  }

  const bool learn = trainer_ != nullptr;
  const int32_t hidden_layer = static_cast<int32_t>(model_->layers() - 1);
  int32_t max_k = 0;
  for (const Work& w : work) max_k = std::max(max_k, w.k);
  std::vector<float> z, base;  // [active, dim], [active, vocab]
  for (int32_t depth = 1; depth <= max_k; ++depth) {
    if (depth > 1) {  // the newest token of every request still drafting
      b = Batch{};
      for (Work& w : work) {
        if (w.k < depth) continue;
        push_row(b, w.last, w.base_pos + depth - 2, w.kv);
        w.row = static_cast<int32_t>(b.size()) - 1;
      }
    }
    std::vector<Work*> active;
    for (Work& w : work)
      if (w.k >= depth) {
        active.push_back(&w);
        b.logits_rows.push_back(w.row);
      }
    b.hidden_layers = {hidden_layer};
    ForwardResult fr = model_->forward(b, *kv_);
    if (depth == 1)
      for (const Work& w : work)
        if (w.primary) state(requests[w.req].seq).cached = w.n - 1;  // the catch-up rows stay

    const int64_t m = static_cast<int64_t>(active.size());
    z.resize(static_cast<size_t>(m * dim));
    for (int64_t a = 0; a < m; ++a)
      std::copy_n(fr.hidden[0].data() + active[a]->row * dim, dim, z.data() + a * dim);
    normalise(z.data(), m);  // the forward's logits are already W z of these very rows
    if (learn) base = fr.logits;
    head_.add_correction(z.data(), fr.logits.data(), m);

    for (int64_t a = 0; a < m; ++a) {
      Work& w = *active[a];
      const DraftRequest& r = requests[w.req];
      const float* l = fr.logits_row(static_cast<size_t>(a));
      int32_t tok;
      ProcessedDist q;
      if (is_greedy(r.sampler)) {
        tok = argmax(l, vocab);
        q = one_hot(tok);
      } else {
        q = process(l, vocab, r.sampler);
        tok = sample(q, philox_uniform(r.sampler.seed, r.stream, r.position + depth - 1,
                                       kLaneEarlyExitDraft));
      }
      if (learn) {
        PendingDraft& rec = w.rec;
        rec.tokens.push_back(tok);
        rec.prev.push_back(w.last);
        rec.z.insert(rec.z.end(), z.begin() + a * dim, z.begin() + (a + 1) * dim);
        rec.base.insert(rec.base.end(), base.begin() + a * vocab, base.begin() + (a + 1) * vocab);
        rec.logq.push_back(log_prob(l, vocab, tok));
      }
      w.tree.add(depth - 2, tok, std::move(q));
      w.last = tok;
    }
  }

  for (Work& w : work) {
    if (learn) pending_[requests[w.req].seq].push_back(std::move(w.rec));
    trees[w.req] = std::move(w.tree);
  }
  return trees;
}

void EarlyExitDrafter::observe(const DraftOutcome& o) {
  SSD_CHECK(o.tree != nullptr, "early-exit drafter: outcome of sequence {} has no tree", o.seq);
  const DraftTree& tree = *o.tree;
  rounds_.push_back({static_cast<int32_t>(tree.size()), static_cast<int32_t>(o.path.size())});
  if (!trainer_ || tree.empty()) return;
  auto it = pending_.find(o.seq);
  if (it == pending_.end()) return;
  SSD_CHECK(o.vocab == cfg_.vocab && o.target_logits != nullptr,
            "early-exit drafter: outcome has {} logits per row, the model {}", o.vocab, cfg_.vocab);
  // The outcome judges one of the drafts of the last call (SSD may have asked several).
  for (PendingDraft& rec : it->second) {
    if (rec.tokens != tree.tokens || !tree.is_chain()) continue;
    const int32_t n = static_cast<int32_t>(tree.size());
    const int32_t acc = static_cast<int32_t>(o.path.size());
    const int64_t dim = cfg_.dim, vocab = cfg_.vocab;
    double log_s = 0;
    // One tuple per drafted position up to and including the first reject.
    for (int32_t i = 0; i <= std::min(acc, n - 1); ++i) {
      const double tl = now_s();
      DviTuple t;
      t.z.assign(rec.z.begin() + i * dim, rec.z.begin() + (i + 1) * dim);
      t.base_logits.assign(rec.base.begin() + i * vocab, rec.base.begin() + (i + 1) * vocab);
      t.token = rec.tokens[i];
      t.prev_token = rec.prev[i];
      t.reward = i < acc ? 1.0f : 0.0f;
      t.logq_behavior = rec.logq[i];
      const int32_t row = tree.parents[i] + 1;  // the target's distribution that judged node i
      trainer_->target_dist(o.target_logits + static_cast<int64_t>(row) * vocab, t.p_ids, t.p_probs);
      log_s += now_s() - tl;
      trainer_->add(std::move(t));
    }
    trainer_->stats().log_s += log_s;
    break;
  }
  pending_.erase(it);
}

}  // namespace ssd
