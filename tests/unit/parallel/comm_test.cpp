// The Comm seam in one process: the Tensor forms of the collectives on the local communicator
// (size 1: sums leave values alone, gathers and reduce-scatters copy), their argument checks, and
// point-to-point calls, which have no peer here. Two-rank transfers: comm_p2p_test.cpp (mpi_test).
#include <gtest/gtest.h>

#include <string>

#include "ops/op_harness.h"
#include "titan/parallel/comm.h"

namespace titan::parallel {
namespace {

using titan::testing::error_of;

TEST(Comm, LocalTensorCollectivesKeepOrCopyValues) {
  std::unique_ptr<Comm> comm = make_local_comm();
  Tensor f = Tensor::empty({2, 3});
  for (int64_t i = 0; i < 6; ++i) f.data<float>()[i] = 0.5f * static_cast<float>(i);
  Tensor d = Tensor::empty({3}, DType::f64);
  for (int64_t i = 0; i < 3; ++i) d.data<double>()[i] = 0.1 * static_cast<double>(i);
  Tensor n = Tensor::empty({2}, DType::i64);
  n.data<int64_t>()[0] = int64_t{1} << 50;
  n.data<int64_t>()[1] = -7;
  comm->all_reduce_sum(f);
  comm->all_reduce_sum(d);
  comm->all_reduce_sum(n);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(f.data<float>()[i], 0.5f * static_cast<float>(i));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(d.data<double>()[i], 0.1 * static_cast<double>(i));
  EXPECT_EQ(n.data<int64_t>()[0], int64_t{1} << 50);
  EXPECT_EQ(n.data<int64_t>()[1], -7);

  Tensor out = Tensor::zeros({6});  // any shape with size() * numel elements
  comm->all_gather(f, out);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.data<float>()[i], f.data<float>()[i]);
  Tensor out2 = Tensor::zeros({3, 2});
  std::unique_ptr<Pending> p = comm->start_all_gather(f, out2);
  p->wait();
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out2.data<float>()[i], f.data<float>()[i]);
  Tensor mine = Tensor::zeros({6});
  comm->reduce_scatter_sum(f, mine);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(mine.data<float>()[i], f.data<float>()[i]);
}

TEST(Comm, TensorFormsRejectBadTensorsWithOneLineErrors) {
  std::unique_ptr<Comm> comm = make_local_comm();
  Tensor f = Tensor::zeros({4, 6});
  Tensor strided = f.narrow(1, 0, 3);
  const std::string e1 = error_of([&] { comm->all_reduce_sum(strided); });
  EXPECT_NE(e1.find("[comm] all_reduce_sum t: expected a contiguous tensor, got f32[4, 3] on cpu, non-contiguous. "
                    "HINT: call contiguous() first"),
            std::string::npos)
      << e1;
  EXPECT_EQ(e1.find('\n'), std::string::npos) << e1;
  Tensor i32 = Tensor::zeros({3}, DType::i32);
  EXPECT_NE(error_of([&] { comm->all_reduce_sum(i32); })
                .find("[comm] all_reduce_sum t: expected f32, f64 or i64, got i32[3] on cpu"),
            std::string::npos);
  Tensor in = Tensor::zeros({5}), out_big = Tensor::zeros({6});
  EXPECT_NE(error_of([&] { comm->all_gather(in, out_big); })
                .find("[comm] all_gather out: expected 5 elements (1 ranks x 5 of in f32[5]), got f32[6]"),
            std::string::npos)
      << error_of([&] { comm->all_gather(in, out_big); });
  EXPECT_NE(error_of([&] { (void)comm->start_all_gather(in, out_big); })
                .find("[comm] start_all_gather out: expected 5"),
            std::string::npos);
  EXPECT_NE(error_of([&] { comm->reduce_scatter_sum(out_big, in); })
                .find("[comm] reduce_scatter_sum in: expected 5 elements (1 ranks x 5 of out f32[5]), got f32[6]"),
            std::string::npos)
      << error_of([&] { comm->reduce_scatter_sum(out_big, in); });
  Tensor d = Tensor::zeros({5}, DType::f64);
  EXPECT_NE(error_of([&] { comm->all_gather(d, in); }).find("[comm] all_gather in: expected f32, got f64[5] on cpu"),
            std::string::npos);
  Tensor undefined;
  EXPECT_NE(error_of([&] { comm->all_reduce_sum(undefined); }).find("[comm] all_reduce_sum t: the tensor is undefined"),
            std::string::npos);
}

TEST(Comm, LocalSendRecvNameThePeerThatDoesNotExist) {
  std::unique_ptr<Comm> comm = make_local_comm();
  Tensor t = Tensor::zeros({4});
  const std::string send = error_of([&] { comm->send(t, 1, 0); });
  EXPECT_NE(send.find("[comm] send to rank 1: the local communicator is one process (rank 0 of 1) with no peers. "
                      "HINT: point-to-point transfers need a multi-rank run"),
            std::string::npos)
      << send;
  EXPECT_NE(error_of([&] { comm->recv(t, 3, 5); }).find("[comm] recv from rank 3: the local communicator"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::parallel
