#include "topology/sim/roofline.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace ssd::sim {

ForwardCost forward_cost(const ModelShape& model, const DeviceProfile& device, int32_t tp,
                         const LinkProfile& tp_link, const ForwardWork& work) {
  model.check_tp(tp);
  SSD_CHECK(work.rows >= 0 && work.seqs >= 0 && work.context >= 0,
            "a forward needs non-negative rows, sequences and context");
  const double t = tp;
  ForwardCost c;
  SSD_CHECK(work.logits_rows <= work.rows, "a forward asks logits of {} rows of its {}",
            work.logits_rows, work.rows);
  const double logits = work.logits_rows < 0 ? work.rows : work.logits_rows;
  const double kv_tokens = work.seqs * work.context + work.rows;
  const double weights = model.total_weight_bytes() - (logits > 0 ? 0 : model.head_bytes());
  c.bytes = (weights + model.kv_bytes_per_token() * kv_tokens) / t;
  const double attn = 4.0 * work.rows * (work.context + 1) * model.attn_width() *
                      static_cast<double>(model.n_layers);
  const double head = model.head_params();
  c.flops = (2.0 * (model.params() - head) * work.rows + 2.0 * head * logits + attn) / t;
  c.memory_s = c.bytes / (device.mem_bw_Bps * device.mem_efficiency);
  c.compute_s = c.flops / device.peak(model.compute_dtype);
  c.overhead_s = device.overhead_s +
                 (device.layer_overhead_s +
                  device.seq_layer_overhead_s * std::max(0.0, work.seqs - 1)) *
                     static_cast<double>(model.n_layers);
  // Heads split over the TP group, so each device attends over its share.
  c.attention_s = work.context *
                  (work.seqs * device.kv_seq_pos_layer_s + work.rows * device.kv_row_pos_layer_s) *
                  static_cast<double>(model.n_layers) / t;
  if (tp > 1) {
    const double act = work.rows * static_cast<double>(model.dim) * model.act_bytes_per_elem;
    c.comm_s = static_cast<double>(model.n_layers) * 2.0 * ring_all_reduce_s(tp_link, tp, act) +
               ring_all_gather_s(tp_link, tp,
                                 logits * static_cast<double>(model.vocab) *
                                     model.act_bytes_per_elem);
  }
  const double p = device.roofline_p;
  const double roof = p > 0 ? std::pow(std::pow(c.memory_s, p) + std::pow(c.compute_s, p), 1 / p)
                            : std::max(c.memory_s, c.compute_s);
  c.total_s = roof + c.overhead_s + c.attention_s + c.comm_s;
  return c;
}

}  // namespace ssd::sim
