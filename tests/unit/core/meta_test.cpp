// The meta device (core/tensor.h): shapes and accounted storage, no values. Its accounting equals
// the host allocator's for the same allocations, ops check their contracts and skip their kernels,
// reading values is an error, and a simulated rank's mesh has the groups a real one would.
#include <gtest/gtest.h>

#include "titan/core/error.h"
#include "titan/core/tensor.h"
#include "titan/ops/rms_norm/rms_norm.h"
#include "titan/ops/softmax_xent/softmax_xent.h"
#include "titan/parallel/comm.h"
#include "titan/parallel/expert_parallel.h"
#include "titan/parallel/mesh.h"

namespace titan {
namespace {

bool throws(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error&) {
    return true;
  }
  return false;
}

TEST(MetaDevice, AccountsWhatTheHostWouldAndHoldsNoMemory) {
  Allocator& meta = meta_allocator();
  Allocator& host = host_allocator();
  const int64_t meta_before = meta.stats().live_bytes, host_before = host.stats().live_bytes;
  {
    const DeviceScope scope(Device::meta);
    Tensor t = Tensor::zeros({1 << 20, 1024});  // 4 GiB: accounted, never allocated
    EXPECT_TRUE(t.is_meta());
    EXPECT_EQ(meta.stats().live_bytes - meta_before, int64_t{4} << 30);
    EXPECT_EQ(host.stats().live_bytes, host_before);
    const Tensor view = t.narrow(0, 8, 16).reshape({-1});  // views share the storage
    EXPECT_EQ(view.shape(), Shape({16 * 1024}));
    const Tensor copy = view.to(DType::bf16);  // copies keep shapes, on meta
    EXPECT_TRUE(copy.is_meta());
    EXPECT_EQ(meta.stats().live_bytes - meta_before, (int64_t{4} << 30) + 2 * 16 * 1024);
  }
  EXPECT_EQ(meta.stats().live_bytes, meta_before);
  EXPECT_EQ(default_device(), Device::cpu);  // the scope restored it
}

TEST(MetaDevice, ReadingValuesIsAnError) {
  const Tensor m = Tensor::empty({4}, DType::f32, Device::meta);
  EXPECT_TRUE(throws([&] { (void)m.data<float>(); }));
  Tensor host = Tensor::zeros({4});
  EXPECT_TRUE(throws([&] { host.copy_from(m); }));  // meta values into the host: there are none
  Tensor into = Tensor::empty({4}, DType::f32, Device::meta);
  into.copy_from(host);  // into meta: shapes checked, nothing moved
  into.fill_(1.0f);
  EXPECT_TRUE(throws([&] { into.copy_from(Tensor::zeros({5})); }));
}

// An op on meta: its contract is checked and its kernel skipped; an op whose CPU kernel allocates
// (the head's logits chunk) allocates the same on meta.
TEST(MetaDevice, OpsCheckTheirContractsAndSkipTheirKernels) {
  {  // what an op saves follows its input's device, whatever the default device
    const Tensor x = Tensor::empty({8, 16}, DType::f32, Device::meta), w = Tensor::empty({16}, DType::f32, Device::meta);
    Tensor y = Tensor::empty({8, 16}, DType::f32, Device::meta);
    ops::RmsNormSaved saved;
    ops::rms_norm_forward({}, x, w, y, saved);
    EXPECT_TRUE(saved.rstd_N.is_meta());
  }
  const DeviceScope scope(Device::meta);
  const Tensor x = Tensor::empty({8, 16}), w = Tensor::empty({16});
  Tensor y = Tensor::empty({8, 16});
  ops::RmsNormSaved saved;
  ops::rms_norm_forward({}, x, w, y, saved);
  EXPECT_TRUE(saved.rstd_N.is_meta());
  Tensor wrong = Tensor::empty({8, 15});
  EXPECT_TRUE(throws([&] { ops::rms_norm_forward({}, x, w, wrong, saved); }));

  const int64_t n = 64, v = 1000, d = 16;
  const Tensor hx = Tensor::empty({n, d}), hw = Tensor::empty({v, d}), targets = Tensor::empty({n}, DType::i64);
  Tensor dx = Tensor::empty({n, d}), dw = Tensor::zeros({v, d});
  Allocator& meta = meta_allocator();
  meta.reset_peak();
  const int64_t live = meta.stats().live_bytes;
  (void)ops::lm_head_xent({}, hx, hw, targets, 1.0f, dx, dw);
  EXPECT_EQ(meta.stats().peak_bytes - live, n * v * 4);  // the [chunk = n, V] f32 logits
  EXPECT_EQ(meta.stats().live_bytes, live);
}

// A simulated rank of 8 (pp 2 x dp_shard 2 x tp 2) makes the groups a real rank makes; collectives
// on meta tensors check their arguments and move nothing.
TEST(MetaDevice, SimulatedRankHasTheMeshGroups) {
  const std::unique_ptr<parallel::Comm> world = parallel::make_meta_comm(5, 8);
  parallel::MeshDegrees d;
  d.pp = 2;
  d.dp_shard = 2;
  d.tp = 2;
  parallel::DeviceMesh mesh(*world, d);
  EXPECT_EQ(mesh.pp().size(), 2);
  EXPECT_EQ(mesh.pp().rank(), 1);  // rank 5 = ((1 * 1 + 0) * 2 + 0) * 2 + 1
  EXPECT_EQ(mesh.dp_shard().size(), 2);
  EXPECT_EQ(mesh.dp_shard().rank(), 0);
  EXPECT_EQ(mesh.tp().size(), 2);
  EXPECT_EQ(mesh.tp().rank(), 1);
  EXPECT_EQ(mesh.dp().size(), 2);
  Tensor in = Tensor::empty({3}, DType::f32, Device::meta), out = Tensor::empty({6}, DType::f32, Device::meta);
  mesh.dp_shard().all_gather(in, out);
  Tensor bad = Tensor::empty({5}, DType::f32, Device::meta);
  EXPECT_TRUE(throws([&] { mesh.dp_shard().all_gather(in, bad); }));
  EXPECT_TRUE(throws([&] { (void)world->split(0, 0); }));  // no other ranks to ask
}

// Under expert parallelism a meta run routes every rank's rows evenly: 10 rows over 4 experts are
// 3, 3, 2, 2; with ep = 2 this rank (0) sends 6 to itself and 4 to rank 1, and receives 6 from each.
TEST(MetaDevice, ExpertExchangeRoutesEvenly) {
  const std::unique_ptr<parallel::Comm> ep = parallel::make_meta_comm(0, 2);
  parallel::ExpertParallel exchange(*ep, 4);
  const Tensor counts = Tensor::empty({4}, DType::i64, Device::meta);
  const nn::ExpertExchange x = exchange.plan(counts, 10);
  EXPECT_EQ(x.send_rows, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(x.recv_rows_SE, (std::vector<int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(x.num_rows, 12);
  EXPECT_TRUE(x.offsets_E1.is_meta());
  const Tensor rows = Tensor::empty({10, 8}, DType::f32, Device::meta);
  EXPECT_EQ(exchange.to_experts(rows, x).shape(), Shape({12, 8}));
}

}  // namespace
}  // namespace titan
