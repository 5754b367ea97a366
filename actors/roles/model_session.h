// Everything a command needs to run one model on this process: the opened model file, its
// tokenizer (from GGUF metadata, or tokenizer.json beside a safetensors checkpoint), the compute
// backend, the transformer and a KV cache. Built once from a SessionOptions at start-up and
// passed down; commands never re-open or re-decide any of it.
#pragma once

#include <memory>
#include <string>

#include "actors/roles/backend_choice.h"
#include "runtime/backend/backend.h"
#include "runtime/model/transformer.h"
#include "runtime/parallel/collective.h"
#include "runtime/parallel/tp_plan.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ssd {

struct SessionOptions {
  std::string model_path;
  int threads = 1;
  int64_t ctx_size = 0;  // 0 = min(model context, 4096)
  // Non-null on a rank of a tensor-parallel group with T > 1: the session holds this rank's shard
  // of the target (Transformer's TP constructor; collective over the group).
  Collective* tp_group = nullptr;
  TpMode tp_mode = TpMode::Exact;
  // The backend resolved at start-up (actors/roles/backend_choice.h; in a job, agreed over
  // the ranks with this rank's device: session_options in actors/roles/job.h).
  BackendChoice backend;
};

class ModelSession {
 public:
  explicit ModelSession(const SessionOptions& opts);
  ModelSession(const ModelSession&) = delete;
  ModelSession& operator=(const ModelSession&) = delete;

  const ModelFile& file() const { return *file_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Backend& backend() { return *backend_; }
  Transformer& model() { return *model_; }
  KvCache& kv() { return *kv_; }
  // How the target's logits become tokens on this backend (make_token_picker), for the
  // LocalTarget a job builds over model() and kv().
  TokenPicker& picker() { return *picker_; }
  int64_t ctx_size() const { return ctx_size_; }
  // "backend cpu" / "backend cuda:D", with why when --backend auto fell back to the CPU; printed
  // on the model summary line (so a run's stderr keeps its line count).
  const std::string& backend_summary() const { return backend_summary_; }

 private:
  std::unique_ptr<ModelFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<TokenPicker> picker_;  // reads backend_'s memory: destroyed before it
  int64_t ctx_size_ = 0;
  std::string backend_summary_;
};

// The tokenizer of a model file: GGUF metadata, or tokenizer.json in the checkpoint directory.
Tokenizer load_tokenizer(const ModelFile& file);

}  // namespace ssd
