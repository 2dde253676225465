// Two ranks under mpirun (tests/unit/parallel/comm_p2p_test.cpp runs it): point-to-point send/recv
// and the Tensor forms of the collectives, each against values computed by formula. Every value
// below is exact in its dtype, so results are compared for equality.
//   rank 0 sends x[i] = i / 2 - 3 (f32 [3, 5]); rank 1 returns 2 x + 1 and an i64 tensor; a
//   message of the wrong size is refused and stays queued; a ring exchange through start_send and
//   start_recv (a shorter message refused at wait); then all_reduce_sum (f32, f64, i64),
//   all_gather, start_all_gather, reduce_scatter_sum, all_to_all and all_to_all_v on every rank,
//   and the argument errors.
// Prints "[comm_p2p] rank R: N checks passed" per rank, and rank 0 "[comm_p2p] all checks passed
// on W ranks". A mismatch prints what differed and takes the job down (exit code 1), so no rank
// is left waiting in a collective.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "titan/core/error.h"
#include "titan/core/tensor.h"
#include "titan/parallel/comm.h"

namespace titan::parallel {
namespace {

int g_checks = 0;

[[noreturn]] void fail(const Comm& comm, const std::string& what) {
  std::fprintf(stderr, "[comm_p2p] rank %d: FAILED: %s\n", comm.rank(), what.c_str());
  std::fflush(stderr);
  abort_world(1);
  std::exit(1);
}

template <class T, class Want>
void expect_values(const Comm& comm, const char* what, const Tensor& t, Want want) {
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const T w = static_cast<T>(want(i));
    if (p[i] != w) fail(comm, str(what, ": index ", i, ": got ", p[i], ", want ", w));
  }
  ++g_checks;
}

// `fn` throws a titan::Error whose message holds `needle`.
template <class Fn>
void expect_error(const Comm& comm, const char* what, Fn fn, const std::string& needle) {
  try {
    fn();
  } catch (const Error& e) {
    if (std::string(e.what()).find(needle) == std::string::npos) {
      fail(comm, str(what, ": error \"", e.what(), "\" does not contain \"", needle, "\""));
    }
    ++g_checks;
    return;
  }
  fail(comm, str(what, ": no error"));
}

void point_to_point(Comm& comm) {
  const Shape shape = {3, 5};
  auto x = [](int64_t i) { return 0.5 * static_cast<double>(i) - 3.0; };
  constexpr int64_t kBig = int64_t{1} << 40;  // beyond f32 and i32: the i64 travels as i64
  if (comm.rank() == 0) {
    Tensor t = Tensor::empty(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(x(i));
    comm.send(t, 1, 7);
    Tensor back = Tensor::zeros(shape);
    comm.recv(back, 1, 8);
    expect_values<float>(comm, "recv of 2 x + 1 from rank 1", back, [&](int64_t i) { return 2 * x(i) + 1; });
    Tensor ids = Tensor::zeros({4}, DType::i64);
    comm.recv(ids, 1, 9);
    expect_values<int64_t>(comm, "recv of i64 from rank 1", ids, [&](int64_t i) { return kBig + i; });
    // Four elements, where rank 1 first expects five.
    Tensor four = Tensor::empty({4});
    for (int64_t i = 0; i < 4; ++i) four.data<float>()[i] = static_cast<float>(10 + i);
    comm.send(four, 1, 10);
  } else if (comm.rank() == 1) {
    Tensor t = Tensor::zeros(shape);
    comm.recv(t, 0, 7);
    expect_values<float>(comm, "recv of x from rank 0", t, x);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 2 * t.data<float>()[i] + 1;
    comm.send(t, 0, 8);
    Tensor ids = Tensor::empty({4}, DType::i64);
    for (int64_t i = 0; i < 4; ++i) ids.data<int64_t>()[i] = kBig + i;
    comm.send(ids, 0, 9);
    Tensor five = Tensor::zeros({5});
    expect_error(comm, "recv of the wrong size", [&] { comm.recv(five, 0, 10); },
                 "[comm] recv from rank 0 (tag 10) into f32[5]: expected 5 elements (20 bytes), got a message "
                 "of 16 bytes");
    Tensor four = Tensor::zeros({4});
    comm.recv(four, 0, 10);  // the refused message is still there
    expect_values<float>(comm, "recv after a refused message", four, [](int64_t i) { return 10.0 + i; });
  }
  Tensor t = Tensor::zeros({2});
  expect_error(comm, "send to a rank out of range", [&] { comm.send(t, comm.size(), 0); },
               str("[comm] send to rank ", comm.size(), ": not a rank of this ", comm.size(),
                   "-rank mpi communicator"));
  expect_error(comm, "recv from itself", [&] { comm.recv(t, comm.rank(), 0); },
               str("[comm] recv from rank ", comm.rank(), ": that is this rank"));
  expect_error(comm, "negative tag", [&] { comm.send(t, 1 - comm.rank() % 2, -1); }, "tag -1 is negative");
  Tensor strided = Tensor::zeros({4, 6}).narrow(1, 0, 3);
  expect_error(comm, "strided send", [&] { comm.send(strided, 1 - comm.rank() % 2, 0); },
               "[comm] send t: expected a contiguous tensor, got f32[4, 3] on cpu, non-contiguous");
}

// Every rank sends to the next and receives from the previous, both started before either waits
// (the ring of context parallelism): 64 Ki floats, beyond the eager limit of MPI's shared-memory
// transport, so blocking sends both ways would wait on each other.
void ring(Comm& comm) {
  const int r = comm.rank(), w = comm.size(), next = (r + 1) % w, prev = (r + w - 1) % w;
  const int64_t n = int64_t{1} << 16;
  Tensor mine = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) mine.data<float>()[i] = static_cast<float>(1000 * r + i % 1000);
  Tensor theirs = Tensor::zeros({n});
  std::unique_ptr<Pending> recv = comm.start_recv(theirs, prev, 20);
  std::unique_ptr<Pending> send = comm.start_send(mine, next, 20);
  recv->wait();
  send->wait();
  expect_values<float>(comm, "start_recv from the previous rank", theirs,
                       [&](int64_t i) { return 1000.0 * prev + static_cast<double>(i % 1000); });
  // A message shorter than the posted tensor is refused when the receive is waited for.
  Tensor three = Tensor::zeros({3}), four = Tensor::zeros({4});
  std::unique_ptr<Pending> short_recv = comm.start_recv(four, prev, 21);
  comm.start_send(three, next, 21)->wait();
  expect_error(comm, "start_recv of a shorter message", [&] { short_recv->wait(); },
               str("[comm] recv from rank ", prev, " (tag 21) into f32[4]: expected 4 elements, got a message of 12 bytes"));
}

void collectives(Comm& comm) {
  const int64_t r = comm.rank(), w = comm.size();
  const int64_t tri = w * (w + 1) / 2;  // sum over ranks of (rank + 1)
  // all_reduce_sum: rank r holds (r + 1) * v[i].
  Tensor f = Tensor::empty({3, 7});
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = static_cast<float>((r + 1) * (i - 5));
  comm.all_reduce_sum(f);
  expect_values<float>(comm, "all_reduce_sum f32", f, [&](int64_t i) { return tri * (i - 5); });
  Tensor d = Tensor::empty({9}, DType::f64);
  for (int64_t i = 0; i < d.numel(); ++i) d.data<double>()[i] = (r + 1) * (i + 0.25);
  comm.all_reduce_sum(d);
  expect_values<double>(comm, "all_reduce_sum f64", d, [&](int64_t i) { return tri * (i + 0.25); });
  Tensor n = Tensor::empty({5}, DType::i64);
  for (int64_t i = 0; i < n.numel(); ++i) n.data<int64_t>()[i] = (r + 1) * (int64_t{1} << 40) + i;
  comm.all_reduce_sum(n);
  expect_values<int64_t>(comm, "all_reduce_sum i64", n, [&](int64_t i) { return tri * (int64_t{1} << 40) + w * i; });

  // The host-value helpers and the Tensor broadcast.
  double pair[2] = {0.5 * (r + 1), -static_cast<double>(r)};
  comm.all_reduce_sum(std::span<double>(pair));
  Tensor pair_t = Tensor::wrap(pair, {2}, DType::f64, nullptr);
  expect_values<double>(comm, "all_reduce_sum span", pair_t, [&](int64_t i) { return i == 0 ? 0.5 * tri : -(tri - w); });
  double peak[1] = {static_cast<double>(10 * r)};
  comm.all_reduce_max(std::span<double>(peak));
  Tensor peak_t = Tensor::wrap(peak, {1}, DType::f64, nullptr);
  expect_values<double>(comm, "all_reduce_max span", peak_t, [&](int64_t) { return 10.0 * (w - 1); });
  Tensor from_last = Tensor::empty({3}, DType::i64);
  for (int64_t i = 0; i < 3; ++i) from_last.data<int64_t>()[i] = (int64_t{1} << 40) * r + i;
  comm.broadcast(from_last, static_cast<int>(w - 1));
  expect_values<int64_t>(comm, "broadcast from the last rank", from_last,
                         [&](int64_t i) { return (int64_t{1} << 40) * (w - 1) + i; });

  // all_gather: rank r contributes 100 r + i; out holds every rank's piece in rank order.
  Tensor in = Tensor::empty({5});
  for (int64_t i = 0; i < 5; ++i) in.data<float>()[i] = static_cast<float>(100 * r + i);
  Tensor out = Tensor::zeros({w, 5});
  comm.all_gather(in, out);
  expect_values<float>(comm, "all_gather", out, [](int64_t j) { return 100 * (j / 5) + j % 5; });
  Tensor out2 = Tensor::zeros({w * 5});
  std::unique_ptr<Pending> pending = comm.start_all_gather(in, out2);
  pending->wait();
  expect_values<float>(comm, "start_all_gather", out2, [](int64_t j) { return 100 * (j / 5) + j % 5; });

  // reduce_scatter_sum: rank r holds (r + 1) * j over w * 6 elements; this rank gets the sum of
  // its slice [6 rank, 6 rank + 6).
  Tensor whole = Tensor::empty({w * 6});
  for (int64_t j = 0; j < whole.numel(); ++j) whole.data<float>()[j] = static_cast<float>((r + 1) * j);
  Tensor mine = Tensor::zeros({2, 3});
  comm.reduce_scatter_sum(whole, mine);
  expect_values<float>(comm, "reduce_scatter_sum", mine, [&](int64_t i) { return tri * (6 * r + i); });
  // The same in bf16 (small integers: every partial sum is exact in bf16), and a bf16 gather.
  Tensor whole_bf16 = whole.to(DType::bf16), mine_bf16 = Tensor::zeros({2, 3}, DType::bf16);
  comm.reduce_scatter_sum(whole_bf16, mine_bf16);
  expect_values<float>(comm, "reduce_scatter_sum bf16", mine_bf16.to(DType::f32),
                       [&](int64_t i) { return tri * (6 * r + i); });
  // bf16 travels as f32 pairs: an even count per rank (4 of in's 5), and an odd one is refused.
  Tensor in_bf16 = in.narrow(0, 0, 4).to(DType::bf16), out_bf16 = Tensor::zeros({w * 4}, DType::bf16);
  comm.start_all_gather(in_bf16, out_bf16)->wait();
  expect_values<float>(comm, "start_all_gather bf16", out_bf16.to(DType::f32),
                       [](int64_t j) { return 100 * (j / 4) + j % 4; });
  Tensor odd_bf16 = in.to(DType::bf16), odd_out = Tensor::zeros({w * 5}, DType::bf16);
  expect_error(comm, "start_all_gather odd bf16", [&] { comm.start_all_gather(odd_bf16, odd_out); },
               "an even element count per rank");

  // all_to_all: rank r sends r + q + 1 to rank q, so it receives s + r + 1 from rank s; then
  // all_to_all_v moves that many values 1000 r + 100 q + i from rank r to rank q (uneven sizes,
  // an empty block nowhere since every count is >= 1).
  Tensor send_n = Tensor::empty({w}, DType::i64), recv_n = Tensor::zeros({w}, DType::i64);
  for (int64_t q = 0; q < w; ++q) send_n.data<int64_t>()[q] = r + q + 1;
  comm.all_to_all(send_n, recv_n);
  expect_values<int64_t>(comm, "all_to_all", recv_n, [&](int64_t s) { return s + r + 1; });
  std::vector<int64_t> send_counts, recv_counts;
  for (int64_t q = 0; q < w; ++q) send_counts.push_back(send_n.data<int64_t>()[q]);
  for (int64_t q = 0; q < w; ++q) recv_counts.push_back(recv_n.data<int64_t>()[q]);
  Tensor rows = Tensor::empty({w * (r + 1) + tri - w});  // sum over q of r + q + 1
  for (int64_t q = 0, at = 0; q < w; ++q) {
    for (int64_t i = 0; i < r + q + 1; ++i) rows.data<float>()[at++] = static_cast<float>(1000 * r + 100 * q + i);
  }
  Tensor got = Tensor::zeros({w * (r + 1) + tri - w});  // sum over s of s + r + 1
  comm.all_to_all_v(rows, send_counts, got, recv_counts);
  std::vector<float> want;
  for (int64_t s = 0; s < w; ++s) {
    for (int64_t i = 0; i < s + r + 1; ++i) want.push_back(static_cast<float>(1000 * s + 100 * r + i));
  }
  expect_values<float>(comm, "all_to_all_v", got, [&](int64_t j) { return want[static_cast<size_t>(j)]; });

  // Bad arguments fail on every rank alike, before anything is sent.
  Tensor short_got = Tensor::zeros({got.numel() - 1});
  expect_error(comm, "all_to_all_v size", [&] { comm.all_to_all_v(rows, send_counts, short_got, recv_counts); },
               str("[comm] all_to_all_v recv_counts: the counts sum to ", got.numel(), " elements but the tensor is f32[",
                   got.numel() - 1, "]"));
  Tensor short_out = Tensor::zeros({w * 5 - 1});
  expect_error(comm, "all_gather size", [&] { comm.all_gather(in, short_out); },
               str("[comm] all_gather out: expected ", w * 5, " elements (", w, " ranks x 5 of in f32[5]), got f32[",
                   w * 5 - 1, "]"));
  Tensor bf = Tensor::zeros({4}, DType::bf16);
  expect_error(comm, "all_reduce_sum dtype", [&] { comm.all_reduce_sum(bf); },
               "[comm] all_reduce_sum t: expected f32, f64 or i64, got bf16[4] on cpu");
  Tensor i64_out = Tensor::zeros({2, 3}, DType::i64);
  expect_error(comm, "reduce_scatter_sum dtype", [&] { comm.reduce_scatter_sum(whole, i64_out); },
               "[comm] reduce_scatter_sum out: expected f32, got i64[2, 3] on cpu");
}

}  // namespace
}  // namespace titan::parallel

int main() {
  using namespace titan::parallel;
  Comm* comm = nullptr;
  try {
    comm = &world_comm();
    if (comm->size() != 2) {
      std::fprintf(stderr, "[comm_p2p] needs 2 ranks (mpirun -np 2), got %d\n", comm->size());
      return 2;
    }
    point_to_point(*comm);
    ring(*comm);
    collectives(*comm);
    comm->barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[comm_p2p] rank %d: unexpected error: %s\n", comm ? comm->rank() : -1, e.what());
    std::fflush(stderr);
    abort_world(1);
    return 1;
  }
  std::printf("[comm_p2p] rank %d: %d checks passed\n", comm->rank(), g_checks);
  std::fflush(stdout);
  comm->barrier();
  if (comm->rank() == 0) std::printf("[comm_p2p] all checks passed on %d ranks\n", comm->size());
  return 0;
}
