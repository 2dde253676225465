// The attention merge: its own case list for the shared harness, and the property it exists for:
// attention over a key range equals the merge of attention over any split of the range into
// 2-4 parts (context parallelism's ring attention, split-KV decoding), forward and every
// gradient, the fp64 composite against the fp64 full attention and against finite differences,
// and each kernel's composite against the full reference.
#include "titan/ops/attention_merge/attention_merge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "titan/ops/attention/attention.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// ---- the merge op on its own ------------------------------------------------------------------

struct MergeCase {
  int64_t b, t, h, kv, parts;
  bool empty_rows = false;  // some rows -inf in some parts, one row -inf in all
};
const MergeCase kMergeCases[] = {{1, 1, 1, 1, 1}, {1, 3, 2, 5, 2}, {2, 7, 3, 16, 3, true}, {1, 33, 4, 24, 4, true},
                                 {2, 130, 2, 64, 2}};

std::string merge_name(const MergeCase& c) {
  return str("B=", c.b, " T=", c.t, " H=", c.h, " Kv=", c.kv, " parts=", c.parts, c.empty_rows ? " empty rows" : "");
}

struct MergeInputs {
  std::vector<Tensor> outs, lses;
  Tensor dout, dlse;
};
MergeInputs merge_inputs(const MergeCase& c) {
  MergeInputs in;
  for (int64_t r = 0; r < c.parts; ++r) {
    in.outs.push_back(random_f32({c.b, c.t, c.h, c.kv}, 20 + r));
    Tensor lse = random_f32({c.b, c.h, c.t}, 40 + r, 3.0f);
    if (c.empty_rows) {
      for (int64_t i = r; i < lse.numel(); i += 3) lse.data<float>()[i] = -std::numeric_limits<float>::infinity();
      lse.data<float>()[0] = -std::numeric_limits<float>::infinity();  // every part: row 0 saw nothing
    }
    in.lses.push_back(lse);
  }
  in.dout = random_f32({c.b, c.t, c.h, c.kv}, 60);
  in.dlse = random_f32({c.b, c.h, c.t}, 61);
  return in;
}

RefFunction merge_reference(const MergeCase& c) {
  const ref::MergeSizes n{c.b, c.t, c.h, c.kv};
  const int64_t no = c.b * c.t * c.h * c.kv, nl = c.b * c.h * c.t, parts = c.parts;
  // Inputs: out_0 .. out_{R-1}, lse_0 .. lse_{R-1}; the output is out followed by lse.
  auto forward = [=](const std::vector<Doubles>& in) {
    std::vector<const double*> outs, lses;
    for (int64_t r = 0; r < parts; ++r) outs.push_back(in[r].data()), lses.push_back(in[parts + r].data());
    Doubles y(no + nl);
    ref::attention_merge_forward<double>(n, outs, lses, y.data(), y.data() + no);
    return y;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    const Doubles y = forward(in);
    std::vector<const double*> outs, lses;
    std::vector<Doubles> grads(2 * parts);
    std::vector<double*> douts, dlses;
    for (int64_t r = 0; r < parts; ++r) {
      outs.push_back(in[r].data()), lses.push_back(in[parts + r].data());
      grads[r].resize(no), grads[parts + r].resize(nl);
      douts.push_back(grads[r].data()), dlses.push_back(grads[parts + r].data());
    }
    ref::attention_merge_backward<double>(n, dy.data(), dy.data() + no, y.data(), y.data() + no, outs, lses, douts,
                                          dlses);
    return grads;
  };
  RefFunction f{{}, {}, forward, backward};
  for (int64_t r = 0; r < parts; ++r) f.names.push_back(str("out_", r)), f.inputs.push_back(random_doubles(no, 1 + r));
  for (int64_t r = 0; r < parts; ++r) {
    f.names.push_back(str("lse_", r)), f.inputs.push_back(random_doubles(nl, 11 + r, 2.0));
  }
  return f;
}

OpTest<AttentionMergeImpl, MergeCase> merge_test() {
  return {
      .table = &attention_merge_table(),
      .cases = {std::begin(kMergeCases), std::end(kMergeCases)},
      .name = merge_name,
      .forward = [](const AttentionMergeImpl& impl, const MergeCase& c) -> Outputs {
        const MergeInputs in = merge_inputs(c);
        Tensor out = garbage(in.dout.shape()), lse = garbage(in.dlse.shape());
        impl.forward(in.outs, in.lses, out, lse);
        return {{"out", out}, {"lse", lse}};
      },
      .backward = [](const AttentionMergeImpl& impl, const MergeCase& c) -> Outputs {
        const MergeInputs in = merge_inputs(c);
        Tensor out, lse;
        attention_merge_forward(in.outs, in.lses, out, lse);
        std::vector<Tensor> douts, dlses;
        for (int64_t r = 0; r < c.parts; ++r) douts.push_back(garbage(out.shape())), dlses.push_back(garbage(lse.shape()));
        impl.backward(in.dout, in.dlse, out, lse, in.outs, in.lses, douts, dlses);
        Outputs o;
        for (int64_t r = 0; r < c.parts; ++r) o.emplace_back(str("dout_", r), douts[r]), o.emplace_back(str("dlse_", r), dlses[r]);
        return o;
      },
      .threads = {1, 2},
      .reference = merge_reference,
      .fd_cases = {{1, 1, 1, 1, 1}, {1, 2, 2, 3, 2}, {1, 3, 1, 2, 3}, {2, 2, 1, 2, 4}},
  };
}

TEST(AttentionMerge, ReferenceBackwardMatchesFiniteDifferences) { sweep(merge_test(), {Mode::gradient}); }

TEST(AttentionMerge, KernelsMatchReference) { sweep(merge_test(), {Mode::forward, Mode::backward}); }

// One part is itself; a row with no visible key in any part merges to out 0, lse -inf.
TEST(AttentionMerge, OnePartAndEmptyRows) {
  const MergeCase c{1, 4, 2, 8, 1};
  const MergeInputs in = merge_inputs(c);
  for (const AttentionMergeImpl& impl : attention_merge_table().impls()) {
    Tensor out = garbage(in.dout.shape()), lse = garbage(in.dlse.shape());
    impl.forward(std::span(in.outs).first(1), std::span(in.lses).first(1), out, lse);
    EXPECT_TRUE(all_close(impl.name + " out", out, in.outs[0], kF32Tol));
    EXPECT_TRUE(all_close(impl.name + " lse", lse, in.lses[0], kF32Tol));
    const float neg_inf = -std::numeric_limits<float>::infinity();
    std::vector<Tensor> lses = {Tensor::empty({1, 2, 4}), Tensor::empty({1, 2, 4})};
    for (Tensor& l : lses) std::fill_n(l.data<float>(), l.numel(), neg_inf);
    const std::vector<Tensor> outs = {in.outs[0], in.outs[0]};
    impl.forward(outs, lses, out, lse);
    for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.data<float>()[i], 0.0f) << impl.name;
    for (int64_t i = 0; i < lse.numel(); ++i) EXPECT_EQ(lse.data<float>()[i], neg_inf) << impl.name;
  }
}

TEST(AttentionMerge, RejectsMismatchedParts) {
  const std::vector<Tensor> outs = {random_f32({1, 4, 2, 8}, 1), random_f32({1, 4, 2, 6}, 2)};
  const std::vector<Tensor> lses = {random_f32({1, 2, 4}, 3), random_f32({1, 2, 4}, 4)};
  Tensor out, lse;
  EXPECT_NE(error_of([&] { attention_merge_forward(outs, lses, out, lse); })
                .find("[attention_merge] outs[1]: expected a contiguous f32[1, 4, 2, 8] like outs[0], got"),
            std::string::npos);
  EXPECT_NE(error_of([&] { attention_merge_forward(outs, std::span(lses).first(1), out, lse); })
                .find("[attention_merge] expected 1 to 64 parts with one lse each, got 2 outs and 1 lses"),
            std::string::npos);
}

// ---- attention over split keys, merged -------------------------------------------------------

// Attention of t query rows over tk keys (GQA h / g heads, head dims k and kv), with the mask and
// offsets, computed whole and as parts over the key ranges [cuts[i], cuts[i+1]).
struct SplitCase {
  int64_t b, t, tk, h, g, k, kv;
  AttentionMask mask;
  int64_t q_offset, kv_offset;
  std::vector<int64_t> cuts;  // 0 = cuts[0] < ... < cuts.back() = tk
};
const SplitCase kSplitCases[] = {
    // A causal sequence split in 2, 3 and 4 (queries at the keys' positions: a rank's own chunk).
    {1, 9, 9, 2, 1, 8, 8, AttentionMask::causal, 0, 0, {0, 4, 9}},
    {2, 17, 17, 4, 2, 16, 16, AttentionMask::causal, 0, 0, {0, 5, 11, 17}},
    {1, 33, 33, 4, 1, 8, 12, AttentionMask::causal, 0, 0, {0, 1, 20, 32, 33}},
    // A later chunk's queries against every earlier key and its own (ring attention's steps),
    // parts past the diagonal that some rows do not see at all.
    {1, 12, 30, 2, 2, 16, 8, AttentionMask::causal, 18, 0, {0, 10, 18, 30}},
    {2, 140, 300, 4, 2, 32, 16, AttentionMask::causal, 160, 0, {0, 129, 257, 300}},
    // A full mask (encoder / cross attention), tile-crossing ranges.
    {1, 130, 260, 2, 1, 16, 24, AttentionMask::full, 0, 0, {0, 128, 130, 260}},
};

std::string split_name(const SplitCase& c) {
  std::string cuts;
  for (const int64_t x : c.cuts) cuts += str(cuts.empty() ? "" : ",", x);
  return str("B=", c.b, " T=", c.t, " Tk=", c.tk, " H=", c.h, " G=", c.g, " K=", c.k, " Kv=", c.kv,
             c.mask == AttentionMask::full ? " full" : " causal", " q_offset=", c.q_offset, " kv_offset=", c.kv_offset,
             " cuts=", cuts);
}

AttentionArgs split_args(const SplitCase& c, int64_t first_key) {
  AttentionArgs a;
  a.scale = 0.6f;
  a.mask = c.mask;
  a.q_offset = c.q_offset;
  a.kv_offset = c.kv_offset + first_key;
  return a;
}

// Rows [begin, end) of dim 1 of a [B, T, G, X] tensor, as a contiguous copy; and the reverse.
Tensor rows_of(const Tensor& x, int64_t begin, int64_t end) {
  const int64_t b = x.size(0), t = x.size(1), inner = x.size(2) * x.size(3);
  Tensor y = Tensor::empty({b, end - begin, x.size(2), x.size(3)});
  for (int64_t bi = 0; bi < b; ++bi) {
    std::copy_n(x.data<float>() + (bi * t + begin) * inner, (end - begin) * inner,
                y.data<float>() + bi * (end - begin) * inner);
  }
  return y;
}
void put_rows(const Tensor& part, Tensor& x, int64_t begin) {
  const int64_t b = x.size(0), t = x.size(1), n = part.size(1), inner = x.size(2) * x.size(3);
  for (int64_t bi = 0; bi < b; ++bi) {
    std::copy_n(part.data<float>() + bi * n * inner, n * inner, x.data<float>() + (bi * t + begin) * inner);
  }
}

struct SplitInputs {
  Tensor q, k, v, dout, dlse;
};
SplitInputs split_inputs(const SplitCase& c) {
  return {random_f32({c.b, c.t, c.h, c.k}, 1), random_f32({c.b, c.tk, c.g, c.k}, 2),
          random_f32({c.b, c.tk, c.g, c.kv}, 3), random_f32({c.b, c.t, c.h, c.kv}, 4), random_f32({c.b, c.h, c.t}, 5)};
}

// Forward and backward through the parts with `impl` and the merge kernel, or whole with the
// reference (the table's first entry): out, lse, dq, dk, dv either way.
Outputs run_split(const AttentionImpl& impl, const SplitCase& c, bool backward) {
  const SplitInputs in = split_inputs(c);
  const Shape out_shape{c.b, c.t, c.h, c.kv}, lse_shape{c.b, c.h, c.t};
  Tensor out = Tensor::empty(out_shape), dq = garbage(in.q.shape()), dk = garbage(in.k.shape()),
         dv = garbage(in.v.shape());
  AttentionSaved saved{Tensor::empty(lse_shape)};
  if (impl.name == attention_table().ref().name) {
    impl.forward(split_args(c, 0), in.q, in.k, in.v, out, saved);
    if (backward) impl.backward(split_args(c, 0), in.dout, in.dlse, in.q, in.k, in.v, out, saved, dq, dk, dv);
  } else {
    const AttentionMergeImpl& merge = attention_merge_table().impls().back();
    const size_t parts = c.cuts.size() - 1;
    std::vector<Tensor> ks, vs, outs, lses, douts(parts), dlses(parts);
    std::vector<AttentionSaved> saves(parts);
    for (size_t r = 0; r < parts; ++r) {
      ks.push_back(rows_of(in.k, c.cuts[r], c.cuts[r + 1]));
      vs.push_back(rows_of(in.v, c.cuts[r], c.cuts[r + 1]));
      outs.push_back(Tensor::empty(out_shape));
      saves[r].lse_BHT = Tensor::empty(lse_shape);
      impl.forward(split_args(c, c.cuts[r]), in.q, ks[r], vs[r], outs[r], saves[r]);
      lses.push_back(saves[r].lse_BHT);
      douts[r] = Tensor::empty(out_shape), dlses[r] = Tensor::empty(lse_shape);
    }
    merge.forward(outs, lses, out, saved.lse_BHT);
    if (backward) {
      merge.backward(in.dout, in.dlse, out, saved.lse_BHT, outs, lses, douts, dlses);
      std::fill_n(dq.data<float>(), dq.numel(), 0.0f);
      for (size_t r = 0; r < parts; ++r) {
        Tensor dq_r = Tensor::empty(in.q.shape()), dk_r = Tensor::empty(ks[r].shape()),
               dv_r = Tensor::empty(vs[r].shape());
        impl.backward(split_args(c, c.cuts[r]), douts[r], dlses[r], in.q, ks[r], vs[r], outs[r], saves[r], dq_r, dk_r,
                      dv_r);
        for (int64_t i = 0; i < dq.numel(); ++i) dq.data<float>()[i] += dq_r.data<float>()[i];
        put_rows(dk_r, dk, c.cuts[r]);
        put_rows(dv_r, dv, c.cuts[r]);
      }
    }
  }
  if (!backward) return {{"out", out}, {"lse", saved.lse_BHT}};
  return {{"dq", dq}, {"dk", dk}, {"dv", dv}};
}

// The fp64 composite as a function of q, k, v: every part's reference attention, then the
// reference merge; its backward the chain (merge backward, each part's backward with its dlse).
// The output is out followed by lse.
struct Fp64Split {
  SplitCase c;
  Doubles forward(const std::vector<Doubles>& in, std::vector<Doubles>* parts_out = nullptr,
                  std::vector<Doubles>* parts_lse = nullptr) const {
    const int64_t no = c.b * c.t * c.h * c.kv, nl = c.b * c.h * c.t;
    const size_t parts = c.cuts.size() - 1;
    std::vector<Doubles> outs(parts, Doubles(no)), lses(parts, Doubles(nl));
    for (size_t r = 0; r < parts; ++r) {
      const Doubles k = slice(in[1], c.k, r), v = slice(in[2], c.kv, r);
      ref::attention_forward<double>(sizes(r), 0.6, split_args(c, c.cuts[r]), in[0].data(), k.data(), v.data(),
                                     outs[r].data(), lses[r].data());
    }
    Doubles y(no + nl);
    ref::attention_merge_forward<double>({c.b, c.t, c.h, c.kv}, pointers(outs), pointers(lses), y.data(),
                                         y.data() + no);
    if (parts_out) *parts_out = outs, *parts_lse = lses;
    return y;
  }
  std::vector<Doubles> backward(const std::vector<Doubles>& in, const Doubles& dy) const {
    const int64_t no = c.b * c.t * c.h * c.kv, nl = c.b * c.h * c.t;
    const size_t parts = c.cuts.size() - 1;
    std::vector<Doubles> outs, lses;
    const Doubles y = forward(in, &outs, &lses);
    std::vector<Doubles> douts(parts, Doubles(no)), dlses(parts, Doubles(nl));
    std::vector<double*> dout_p, dlse_p;
    for (size_t r = 0; r < parts; ++r) dout_p.push_back(douts[r].data()), dlse_p.push_back(dlses[r].data());
    ref::attention_merge_backward<double>({c.b, c.t, c.h, c.kv}, dy.data(), dy.data() + no, y.data(), y.data() + no,
                                          pointers(outs), pointers(lses), dout_p, dlse_p);
    Doubles dq(in[0].size(), 0.0), dk(in[1].size()), dv(in[2].size());
    for (size_t r = 0; r < parts; ++r) {
      const Doubles k = slice(in[1], c.k, r), v = slice(in[2], c.kv, r);
      Doubles dq_r(dq.size()), dk_r(k.size()), dv_r(v.size());
      ref::attention_backward<double>(sizes(r), 0.6, split_args(c, c.cuts[r]), douts[r].data(), dlses[r].data(),
                                      in[0].data(), k.data(), v.data(), outs[r].data(), lses[r].data(), dq_r.data(),
                                      dk_r.data(), dv_r.data());
      for (size_t i = 0; i < dq.size(); ++i) dq[i] += dq_r[i];
      unslice(dk_r, dk, c.k, r);
      unslice(dv_r, dv, c.kv, r);
    }
    return {dq, dk, dv};
  }

 private:
  ref::AttentionSizes sizes(size_t r) const {
    return {c.b, c.t, c.cuts[r + 1] - c.cuts[r], c.h, c.g, c.k, c.kv};
  }
  // Rows [cuts[r], cuts[r+1]) of a [b, tk, g, width] array, and back.
  Doubles slice(const Doubles& x, int64_t width, size_t r) const {
    const int64_t inner = c.g * width, n = c.cuts[r + 1] - c.cuts[r];
    Doubles y(static_cast<size_t>(c.b * n * inner));
    for (int64_t bi = 0; bi < c.b; ++bi) {
      std::copy_n(x.begin() + (bi * c.tk + c.cuts[r]) * inner, n * inner, y.begin() + bi * n * inner);
    }
    return y;
  }
  void unslice(const Doubles& part, Doubles& x, int64_t width, size_t r) const {
    const int64_t inner = c.g * width, n = c.cuts[r + 1] - c.cuts[r];
    for (int64_t bi = 0; bi < c.b; ++bi) {
      std::copy_n(part.begin() + bi * n * inner, n * inner, x.begin() + (bi * c.tk + c.cuts[r]) * inner);
    }
  }
  template <class V>
  static std::vector<const double*> pointers(const V& v) {
    std::vector<const double*> p;
    for (const Doubles& d : v) p.push_back(d.data());
    return p;
  }
};

RefFunction split_reference(const SplitCase& c) {
  const Fp64Split s{c};
  return {{"q", "k", "v"},
          {random_doubles(c.b * c.t * c.h * c.k, 1), random_doubles(c.b * c.tk * c.g * c.k, 2),
           random_doubles(c.b * c.tk * c.g * c.kv, 3)},
          [s](const std::vector<Doubles>& in) { return s.forward(in); },
          [s](const std::vector<Doubles>& in, const Doubles& dy) { return s.backward(in, dy); }};
}

OpTest<AttentionImpl, SplitCase> split_test() {
  return {
      .table = &attention_table(),
      .cases = {std::begin(kSplitCases), std::end(kSplitCases)},
      .name = split_name,
      .forward = [](const AttentionImpl& impl, const SplitCase& c) { return run_split(impl, c, false); },
      .backward = [](const AttentionImpl& impl, const SplitCase& c) { return run_split(impl, c, true); },
      .threads = {1, 2},
      .reference = split_reference,
      .fd_cases = {{1, 3, 3, 2, 1, 2, 2, AttentionMask::causal, 0, 0, {0, 1, 3}},
                   {1, 2, 5, 2, 2, 2, 3, AttentionMask::causal, 3, 0, {0, 2, 3, 5}},
                   {1, 2, 4, 2, 1, 3, 1, AttentionMask::full, 0, 0, {0, 1, 2, 3, 4}}},
  };
}

// Each kernel's parts, merged by the merge kernel, against the reference's whole attention.
TEST(AttentionSplitKeys, MergedKernelPartsMatchWholeReference) {
  sweep(split_test(), {Mode::forward, Mode::backward});
}

// The fp64 chain rule of the composite against finite differences.
TEST(AttentionSplitKeys, MergedReferenceBackwardMatchesFiniteDifferences) { sweep(split_test(), {Mode::gradient}); }

// The fp64 composite equals the fp64 whole attention, output, lse and every gradient.
TEST(AttentionSplitKeys, MergedReferenceEqualsWholeReference) {
  for (const SplitCase& c : kSplitCases) {
    const RefFunction f = split_reference(c);
    const ref::AttentionSizes n{c.b, c.t, c.tk, c.h, c.g, c.k, c.kv};
    const int64_t no = c.b * c.t * c.h * c.kv, nl = c.b * c.h * c.t;
    Doubles whole(no + nl);
    ref::attention_forward<double>(n, 0.6, split_args(c, 0), f.inputs[0].data(), f.inputs[1].data(),
                                   f.inputs[2].data(), whole.data(), whole.data() + no);
    const Doubles dy = random_doubles(no + nl, 9);
    std::vector<Doubles> want = {Doubles(f.inputs[0].size()), Doubles(f.inputs[1].size()), Doubles(f.inputs[2].size())};
    ref::attention_backward<double>(n, 0.6, split_args(c, 0), dy.data(), dy.data() + no, f.inputs[0].data(),
                                    f.inputs[1].data(), f.inputs[2].data(), whole.data(), whole.data() + no,
                                    want[0].data(), want[1].data(), want[2].data());
    constexpr Tolerance kFp64{1e-12, 1e-10};
    EXPECT_TRUE(all_close(split_name(c) + " out, lse", f.forward(f.inputs), whole, kFp64));
    const std::vector<Doubles> got = f.backward(f.inputs, dy);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(split_name(c) + " d" + f.names[i], got[i], want[i], kFp64));
  }
}

}  // namespace
}  // namespace titan::ops
