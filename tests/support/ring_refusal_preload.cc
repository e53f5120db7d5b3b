// SPDX-License-Identifier: Apache-2.0
// Preloaded (LD_PRELOAD) into a mimicfs daemon by the mount tests of FUSE over
// io_uring, to make the kernel refuse ring entries, which it otherwise does
// only when it runs out of memory. With MIMICFS_TEST_REFUSE_RING=Q:N the first
// N registrations of queue Q's entries the daemon submits (through liburing's
// io_uring_submit or io_uring_submit_and_wait[_timeout]) carry one iovec
// where the kernel asks for the header's and the payload's, and
// fs/fuse/dev_uring.c refuses them (EINVAL), as it refuses an entry it cannot
// allocate.
#include <dlfcn.h>
#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr uint32_t kCmdRegister = 1;  // FUSE_IO_URING_CMD_REGISTER
constexpr size_t kQueueOffset = 16;   // fuse_uring_cmd_req's qid, after flags and commit_id

struct Plan {
  int queue = -1;
  int count = 0;
};

const Plan& plan() {
  static const Plan planned = [] {
    Plan p;
    const char* text = std::getenv("MIMICFS_TEST_REFUSE_RING");
    if (text == nullptr || std::sscanf(text, "%d:%d", &p.queue, &p.count) != 2) p.queue = -1;
    return p;
  }();
  return planned;
}

std::atomic<int> spoiled{0};

// The queued, not yet submitted SQEs that register an entry of the planned
// queue, while the plan asks for more.
void spoil_registrations(io_uring* ring) {
  const Plan& p = plan();
  if (p.queue < 0) return;
  const unsigned shift = (ring->flags & IORING_SETUP_SQE128) != 0 ? 1 : 0;
  for (unsigned head = ring->sq.sqe_head; head != ring->sq.sqe_tail; ++head) {
    io_uring_sqe* sqe = &ring->sq.sqes[(head & *ring->sq.kring_mask) << shift];
    if (sqe->opcode != IORING_OP_URING_CMD || sqe->cmd_op != kCmdRegister) continue;
    uint16_t queue;
    std::memcpy(&queue, sqe->cmd + kQueueOffset, sizeof queue);
    if (queue != p.queue || spoiled.fetch_add(1) >= p.count) continue;
    sqe->len = 1;
  }
}

}  // namespace

template <typename Function>
static Function real(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

extern "C" int io_uring_submit(io_uring* ring) {
  static const auto submit = real<int (*)(io_uring*)>("io_uring_submit");
  spoil_registrations(ring);
  return submit(ring);
}

extern "C" int io_uring_submit_and_wait(io_uring* ring, unsigned wait) {
  static const auto submit = real<int (*)(io_uring*, unsigned)>("io_uring_submit_and_wait");
  spoil_registrations(ring);
  return submit(ring, wait);
}

extern "C" int io_uring_submit_and_wait_timeout(io_uring* ring, io_uring_cqe** cqe, unsigned wait,
                                                __kernel_timespec* timeout, sigset_t* mask) {
  using Submit = int (*)(io_uring*, io_uring_cqe**, unsigned, __kernel_timespec*, sigset_t*);
  static const auto submit = real<Submit>("io_uring_submit_and_wait_timeout");
  spoil_registrations(ring);
  return submit(ring, cqe, wait, timeout, mask);
}
