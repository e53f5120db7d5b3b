// SPDX-License-Identifier: Apache-2.0
// The kernel's ABI for FUSE over io_uring, as Linux 6.14 introduced it (FUSE
// protocol 7.42, include/uapi/linux/fuse.h), unchanged up to 6.18. Debian 12's
// linux/fuse.h (6.1) predates it; everything else of the protocol comes from
// that header. Only what it lacks is declared here, with the kernel's names
// beside ours, and the sizes checked.
//
// What FuseRing relies on beyond this ABI, as fs/fuse/dev_uring.c is written
// in 6.14 to 6.18 (a later kernel may change it, and these are the places to
// look at first):
//   - the queue a request goes to is the one of task_cpu() of its caller, and
//     the kernel turns to the ring only once every one of num_possible_cpus()
//     queues has an entry (fuse_uring_task_to_queue, is_ring_ready): one
//     queue per possible CPU, numbered as the CPUs;
//   - a request that finds every entry of its queue busy is handed to the
//     next of them that commits, never to an entry registered later
//     (fuse_uring_next_fuse_req): every entry registers at start, and a queue
//     has more entries than requests can wait at once (kEntriesPerQueue);
//   - the kernel copies a request into an entry's buffers, and a reply out of
//     them, only inside the entry's thread's io_uring_enter (task work with
//     IORING_SETUP_DEFER_TASKRUN, or the commit itself): the thread may drop
//     its payload's pages between two such calls (FuseRing's page release);
//   - a registration before the kernel took in the INIT reply fails with
//     EAGAIN, and once the kernel refused an entry it no longer holds requests
//     back for the ring (fc->io_uring set to 0).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mimicfs::fuse_uring_abi {

// FUSE_OVER_IO_URING in the INIT flags (bit 9 of flags2, so bit 41 of the
// 64-bit flags).
constexpr uint64_t kInitFlag = uint64_t{1} << 41;

constexpr uint32_t kCmdRegister = 1;        // FUSE_IO_URING_CMD_REGISTER
constexpr uint32_t kCmdCommitAndFetch = 2;  // FUSE_IO_URING_CMD_COMMIT_AND_FETCH
constexpr size_t kInOutHeaderBytes = 128;   // FUSE_URING_IN_OUT_HEADER_SZ
constexpr size_t kOpInBytes = 128;          // FUSE_URING_OP_IN_OUT_SZ

struct RingEntryInOut {  // struct fuse_uring_ent_in_out
  uint64_t flags;
  uint64_t commit_id;  // the request's unique
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};

struct RingRequestHeader {         // struct fuse_uring_req_header
  char in_out[kInOutHeaderBytes];  // fuse_in_header; fuse_out_header for the reply
  char op_in[kOpInBytes];          // the operation's fixed arguments (in_args[0])
  RingEntryInOut ring_ent_in_out;
};

struct RingCommand {  // struct fuse_uring_cmd_req, in the SQE's 80-byte command area
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};

static_assert(sizeof(RingEntryInOut) == 32);
static_assert(sizeof(RingRequestHeader) == 288);
static_assert(offsetof(RingRequestHeader, ring_ent_in_out) == 256);
static_assert(sizeof(RingCommand) == 24 && offsetof(RingCommand, qid) == 16);

}  // namespace mimicfs::fuse_uring_abi
