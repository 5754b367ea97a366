// Finite-difference checks of every backward op of runtime/train (linear, RMSNorm, RoPE, block
// attention, SiLU, SwiGLU, GRU step, cross-entropy); tolerances in fd_check.h. Shapes are small
// and awkward (odd row counts, GQA with 2 query heads per KV head, context 5 + block 3).
#include <gtest/gtest.h>

#include "runtime/train/ops_attention.h"
#include "runtime/train/ops_cross_entropy.h"
#include "runtime/train/ops_gru.h"
#include "runtime/train/ops_linear.h"
#include "runtime/train/ops_pointwise.h"
#include "runtime/train/ops_rmsnorm.h"
#include "runtime/train/ops_rope.h"
#include "tests/unit/train/fd_check.h"

namespace ssd::train {
namespace {

using test::dotd;
using test::fd_check;
using test::randv;

TEST(TrainOps, LinearGradients) {
  const int64_t n = 3, in = 7, out = 5;
  auto x = randv(n * in, 1), w = randv(out * in, 2), c = randv(n * out, 3);
  std::vector<float> y(n * out), dx(n * in, 0), dw(out * in, 0);
  auto J = [&] {
    linear_forward(x.data(), w.data(), y.data(), n, in, out);
    return dotd(c, y.data());
  };
  linear_backward(c.data(), x.data(), w.data(), dx.data(), dw.data(), n, in, out);
  fd_check("linear dx", x, dx, J);
  fd_check("linear dw", w, dw, J);
}

TEST(TrainOps, RmsNormGradients) {
  const int64_t n = 3, dim = 9;
  auto x = randv(n * dim, 4), g = randv(dim, 5), c = randv(n * dim, 6);
  for (float& v : g) v += 1.0f;
  std::vector<float> y(n * dim), rs(n), dx(n * dim, 0), dg(dim, 0);
  auto J = [&] {
    rmsnorm_forward(x.data(), g.data(), y.data(), rs.data(), n, dim, 1e-5f);
    return dotd(c, y.data());
  };
  J();
  rmsnorm_backward(c.data(), x.data(), g.data(), rs.data(), dx.data(), dg.data(), n, dim);
  fd_check("rmsnorm dx", x, dx, J);
  fd_check("rmsnorm dg", g, dg, J);
}

TEST(TrainOps, RopeGradientIsTheInverseRotation) {
  const int64_t n = 3, heads = 2, hd = 8;
  const auto inv = rope_inv_freq(10000.0f, hd);
  const std::vector<int32_t> pos = {0, 5, 17};
  auto x = randv(n * heads * hd, 7), c = randv(n * heads * hd, 8);
  std::vector<float> y;
  auto J = [&] {
    y = x;
    rope_apply(y.data(), pos.data(), n, heads, hd, inv.data());
    return dotd(c, y.data());
  };
  std::vector<float> dx = c;
  rope_apply(dx.data(), pos.data(), n, heads, hd, inv.data(), true);
  fd_check("rope dx", x, dx, J);
}

TEST(TrainOps, BlockAttentionGradients) {
  const AttentionShape s{4, 2, 6};
  const int64_t B = 3, a = 5, qw = 24, kw = 12;
  auto q = randv(B * qw, 9), kc = randv(a * kw, 10), vc = randv(a * kw, 11),
       kb = randv(B * kw, 12), vb = randv(B * kw, 13), c = randv(B * qw, 14);
  std::vector<float> out(B * qw), probs;
  auto J = [&] {
    block_attention_forward(s, {q.data(), kc.data(), vc.data(), kb.data(), vb.data(), B, a},
                            out.data(), probs);
    return dotd(c, out.data());
  };
  J();
  std::vector<float> dq(q.size(), 0), dkc(kc.size(), 0), dvc(vc.size(), 0), dkb(kb.size(), 0),
      dvb(vb.size(), 0);
  block_attention_backward(s, {q.data(), kc.data(), vc.data(), kb.data(), vb.data(), B, a}, probs,
                           c.data(), dq.data(), dkc.data(), dvc.data(), dkb.data(), dvb.data());
  fd_check("attention dq", q, dq, J);
  fd_check("attention dk context", kc, dkc, J);
  fd_check("attention dv context", vc, dvc, J);
  fd_check("attention dk block", kb, dkb, J);
  fd_check("attention dv block", vb, dvb, J);
}

TEST(TrainOps, BlockAttentionWithoutContext) {
  const AttentionShape s{2, 1, 4};
  const int64_t B = 4;
  auto q = randv(B * 8, 15), kb = randv(B * 4, 16), vb = randv(B * 4, 17), c = randv(B * 8, 18);
  std::vector<float> out(B * 8), probs;
  auto J = [&] {
    block_attention_forward(s, {q.data(), nullptr, nullptr, kb.data(), vb.data(), B, 0},
                            out.data(), probs);
    return dotd(c, out.data());
  };
  J();
  std::vector<float> dq(q.size(), 0), dkb(kb.size(), 0), dvb(vb.size(), 0);
  block_attention_backward(s, {q.data(), nullptr, nullptr, kb.data(), vb.data(), B, 0}, probs,
                           c.data(), dq.data(), nullptr, nullptr, dkb.data(), dvb.data());
  fd_check("attention (a = 0) dq", q, dq, J);
  fd_check("attention (a = 0) dk", kb, dkb, J);
  fd_check("attention (a = 0) dv", vb, dvb, J);
}

TEST(TrainOps, SiluAndSwigluGradients) {
  const int64_t n = 11;
  auto x = randv(n, 19, 3.0f), up = randv(n, 20, 2.0f), c = randv(n, 21);
  std::vector<float> y(n), dx(n, 0), dup(n, 0), dg(n, 0);
  auto Js = [&] {
    silu_forward(x.data(), y.data(), n);
    return dotd(c, y.data());
  };
  silu_backward(c.data(), x.data(), dx.data(), n);
  fd_check("silu dx", x, dx, Js);
  auto Jw = [&] {
    swiglu_forward(x.data(), up.data(), y.data(), n);
    return dotd(c, y.data());
  };
  swiglu_backward(c.data(), x.data(), up.data(), dg.data(), dup.data(), n);
  fd_check("swiglu dgate", x, dg, Jw);
  fd_check("swiglu dup", up, dup, Jw);
}

TEST(TrainOps, GruStepGradients) {
  const int64_t n = 3, d = 5, g = 4;
  auto wih = randv(3 * g * d, 22, 0.6f), whh = randv(3 * g * g, 23, 0.6f),
       bih = randv(3 * g, 24, 0.3f), bhh = randv(3 * g, 25, 0.3f), x = randv(n * d, 26),
       s = randv(n * g, 27), c = randv(n * g, 28);
  std::vector<float> so(n * g);
  GruStepCache cache;
  auto J = [&] {
    gru_forward({wih.data(), whh.data(), bih.data(), bhh.data()}, x.data(), s.data(), so.data(), n,
                d, g, cache);
    return dotd(c, so.data());
  };
  J();
  std::vector<float> dwih(wih.size(), 0), dwhh(whh.size(), 0), dbih(bih.size(), 0),
      dbhh(bhh.size(), 0), ds(s.size(), 0), dx(x.size(), 0);
  GruGrads gr{dwih.data(), dwhh.data(), dbih.data(), dbhh.data()};
  gru_backward({wih.data(), whh.data(), bih.data(), bhh.data()}, cache, c.data(), ds.data(),
               dx.data(), gr, n, d, g);
  fd_check("gru dx", x, dx, J);
  fd_check("gru ds", s, ds, J);
  fd_check("gru dW_ih", wih, dwih, J);
  fd_check("gru dW_hh", whh, dwhh, J);
  fd_check("gru db_ih", bih, dbih, J);
  fd_check("gru db_hh", bhh, dbhh, J);
}

TEST(TrainOps, CrossEntropyGradientAndValue) {
  const int64_t n = 13, label = 4;
  auto z = randv(n, 29, 3.0f);
  std::vector<float> dz(n, 0);
  const float w = 0.7f;
  auto J = [&] { return w * cross_entropy(z.data(), n, label, 0, nullptr); };
  cross_entropy(z.data(), n, label, w, dz.data());
  fd_check("cross-entropy dz", z, dz, J);
  // Value: uniform logits give log(n).
  std::vector<float> flat(n, 2.5f);
  EXPECT_NEAR(cross_entropy(flat.data(), n, 0, 0, nullptr), std::log(13.0), 1e-6);
  EXPECT_EQ(argmax_row(z.data(), n), std::max_element(z.begin(), z.end()) - z.begin());
}

}  // namespace
}  // namespace ssd::train
