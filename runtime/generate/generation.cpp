#include "runtime/generate/generation.h"

#include <algorithm>
#include <chrono>

#include "runtime/core/error.h"
#include "runtime/generate/token_picker.h"

namespace ssd {

bool emit_token(const GenerationRequest& req, GenerationResult& g, size_t index, int32_t tok,
                const BatchTokenCallback& on_token) {
  g.tokens.push_back(tok);
  if (on_token && !on_token(index, tok)) return false;
  if (std::find(req.stop_ids.begin(), req.stop_ids.end(), tok) != req.stop_ids.end()) {
    g.stopped_by_eog = true;
    return false;
  }
  return static_cast<int64_t>(g.tokens.size()) < req.max_new_tokens;
}

double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::vector<float> gather_features(const ForwardResult& fr, const std::vector<int32_t>& rows) {
  std::vector<float> out;
  if (fr.hidden.empty()) return out;
  out.reserve(rows.size() * fr.hidden.size() * fr.dim);
  for (int32_t r : rows)
    for (const auto& layer : fr.hidden)
      out.insert(out.end(), layer.begin() + r * fr.dim, layer.begin() + (r + 1) * fr.dim);
  return out;
}

PrefillResult prefill(TargetModel& target, SeqId seq, const std::vector<int32_t>& prompt,
                      int64_t chunk, const std::vector<int32_t>& hidden_layers) {
  PrefillResult r;
  const double t0 = monotonic_seconds();
  const int64_t n = static_cast<int64_t>(prompt.size());
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t end = std::min(n, start + chunk);
    std::vector<int32_t> part(prompt.begin() + start, prompt.begin() + end);
    Batch b = Batch::sequence(seq, part, static_cast<int32_t>(start));
    if (end < n) b.logits_rows.clear();  // only the last prompt token's logits are needed
    b.hidden_layers = hidden_layers;
    r.last = target.forward(b);
    if (!hidden_layers.empty()) {
      std::vector<int32_t> rows(part.size());
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i);
      const auto f = gather_features(r.last, rows);
      r.features.insert(r.features.end(), f.begin(), f.end());
    }
  }
  r.seconds = monotonic_seconds() - t0;
  return r;
}

void check_context(const TargetModel& target, const GenerationRequest& req, int64_t extra) {
  SSD_CHECK(!req.prompt.empty(), "the prompt is empty (no tokens to condition on)");
  SSD_CHECK(req.max_new_tokens >= 0, "-n {} must not be negative", req.max_new_tokens);
  SSD_CHECK(req.prefill_chunk >= 1, "prefill chunk {} must be positive", req.prefill_chunk);
  const int64_t ctx = std::min<int64_t>(target.config().context_length, target.capacity().tokens);
  const int64_t prompt = static_cast<int64_t>(req.prompt.size());
  const int64_t need = prompt + req.max_new_tokens + extra;
  SSD_CHECK(prompt < ctx,
            "the prompt has {} tokens, more than the context of {} allows (--ctx-size)", prompt,
            ctx);
  if (extra == 0) {
    SSD_CHECK(need <= ctx,
              "prompt ({} tokens) + -n {} = {} exceeds the context of {} tokens; lower -n or raise "
              "--ctx-size",
              prompt, req.max_new_tokens, need, ctx);
  } else {
    SSD_CHECK(need <= ctx,
              "prompt ({} tokens) + -n {} + {} positions verification writes ahead = {} exceeds "
              "the context of {} tokens; lower -n or raise --ctx-size",
              prompt, req.max_new_tokens, extra, need, ctx);
  }
  validate(req.sampler);
}

void check_batch_context(const TargetModel& target, std::span<const GenerationRequest> reqs,
                         int64_t extra) {
  const KvCapacity cap = target.capacity();
  int64_t pages = 0, positions = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    try {
      check_context(target, reqs[i], extra);
    } catch (const Error& e) {
      if (reqs.size() == 1) throw;
      throw Error(fmt::format("request {} of the batch: {}", i, e.what()));
    }
    const int64_t longest = static_cast<int64_t>(reqs[i].prompt.size()) +
                            reqs[i].max_new_tokens + extra;
    positions += longest;
    pages += cap.pages_for(longest);
  }
  SSD_CHECK(pages <= cap.pages(),
            "a batch of {} requests needs {} KV positions at once ({} pages of {}: each request's "
            "prompt + -n{}), but the target's cache holds {} positions ({} pages); lower -n or "
            "the batch size, or raise --ctx-size",
            reqs.size(), positions, pages, cap.page_tokens,
            extra > 0 ? fmt::format(" + {} verified ahead", extra) : std::string(), cap.tokens,
            cap.pages());
}

std::vector<GenerationResult> generate_ar_batch(TargetModel& target,
                                                std::span<const GenerationRequest> reqs,
                                                const BatchTokenCallback& on_token) {
  check_batch_context(target, reqs);
  const size_t n_req = reqs.size();
  std::vector<GenerationResult> res(n_req);
  TargetSeqs seqs(target);

  // Per request: its sequence, the next position, and the next token, drawn by the target's
  // picker from the forward that decided it (as soon as that forward returns: rows left on a
  // device live until the next forward).
  TokenPicker& picker = target.picker();
  struct State {
    SeqId seq = -1;
    int32_t pos = 0;
    int32_t next = -1;
    bool running = false;
  };
  std::vector<State> st(n_req);
  for (size_t i = 0; i < n_req; ++i) {
    st[i].seq = seqs.create();
    PrefillResult pre = prefill(target, st[i].seq, reqs[i].prompt, reqs[i].prefill_chunk);
    res[i].prompt_tokens = static_cast<int64_t>(reqs[i].prompt.size());
    res[i].prefill_s = pre.seconds;
    st[i].pos = static_cast<int32_t>(res[i].prompt_tokens);
    st[i].running = reqs[i].max_new_tokens > 0;
    if (!st[i].running) {
      seqs.release(st[i].seq);
      continue;
    }
    st[i].next = picker.sample(pre.last, 0, reqs[i].sampler, reqs[i].stream, 0);
  }

  const double t1 = monotonic_seconds();
  std::vector<TokenPicker::RowDraw> draws;
  for (;;) {
    // Emit every running request's next token; those that go on form the next forward.
    Batch b;
    b.logits_in_backend = picker.reads_backend_logits();
    std::vector<size_t> rows;  // request of each batch row
    for (size_t i = 0; i < n_req; ++i) {
      if (!st[i].running) continue;
      const GenerationRequest& req = reqs[i];
      GenerationResult& g = res[i];
      const int32_t tok = st[i].next;
      const bool go_on = emit_token(req, g, i, tok, on_token);
      if (!go_on) {
        st[i].running = false;
        g.decode_s = monotonic_seconds() - t1;
        seqs.release(st[i].seq);
        continue;
      }
      b.tokens.push_back(tok);
      b.positions.push_back(st[i].pos++);
      b.seqs.push_back(st[i].seq);
      b.logits_rows.push_back(static_cast<int32_t>(rows.size()));
      rows.push_back(i);
    }
    if (rows.empty()) break;
    const ForwardResult fr = target.forward(b);
    draws.resize(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t i = rows[r];
      draws[r] = {&reqs[i].sampler, reqs[i].stream, static_cast<uint32_t>(res[i].tokens.size())};
    }
    const std::vector<int32_t> next = picker.sample_rows(fr, draws);
    for (size_t r = 0; r < rows.size(); ++r) {
      st[rows[r]].next = next[r];
      res[rows[r]].forwards++;
    }
  }
  return res;
}

GenerationResult generate_ar(TargetModel& target, const GenerationRequest& req,
                             const TokenCallback& on_token) {
  BatchTokenCallback cb;
  if (on_token) cb = [&](size_t, int32_t tok) { return on_token(tok); };
  return std::move(generate_ar_batch(target, {&req, 1}, cb).front());
}

}  // namespace ssd
