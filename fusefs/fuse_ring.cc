// SPDX-License-Identifier: Apache-2.0
#include "fusefs/fuse_ring.h"

#include <fmt/format.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <expected>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "fusefs/fuse_channel.h"
#include "fusefs/fuse_reply.h"
#include "fusefs/fuse_uring_abi.h"

namespace mimicfs {
namespace {

using fuse_uring_abi::kCmdCommitAndFetch;
using fuse_uring_abi::kCmdRegister;
using fuse_uring_abi::kOpInBytes;
using fuse_uring_abi::RingEntryInOut;
using fuse_uring_abi::RingCommand;
using fuse_uring_abi::RingRequestHeader;

// What a completion answers: the entry's command, or the poll of stop_fd_.
constexpr uint64_t kEntryTag = 1;
constexpr uint64_t kStopTag = 2;

// One queue per possible CPU, numbered as the CPUs: the kernel picks the queue
// by task_cpu() of the caller and is ready only when every one of its
// num_possible_cpus() queues has an entry. nullopt when the CPU numbers have
// gaps (a queue would never be found) or cannot be read.
std::optional<size_t> possible_cpus() {
  std::ifstream file("/sys/devices/system/cpu/possible");
  std::string text;
  if (!std::getline(file, text)) return std::nullopt;
  std::stringstream ranges(text);
  std::string range;
  size_t count = 0, highest = 0;
  while (std::getline(ranges, range, ',')) {
    unsigned first = 0, last = 0;
    const int fields = std::sscanf(range.c_str(), "%u-%u", &first, &last);
    if (fields < 1) return std::nullopt;
    if (fields == 1) last = first;
    if (last < first) return std::nullopt;
    count += last - first + 1;
    highest = std::max<size_t>(highest, last);
  }
  if (count == 0 || count != highest + 1) return std::nullopt;
  return count;
}

size_t page_bytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

// One thread's io_uring and ring entry: the header buffer, a page of room in
// front of the payload (where the request is rebuilt), and the payload.
class FuseRing::Entry {
 public:
  struct Completion {
    uint64_t tag;  // kEntryTag or kStopTag
    int result;    // the command's: 0, a request is in the buffers; or -errno
  };

  Entry() = default;
  ~Entry() {
    read_replies_into({});
    if (ring_ready_) io_uring_queue_exit(&ring_);  // cancels the entry's command
    if (memory_ != MAP_FAILED) munmap(memory_, memory_bytes_);
  }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

  // The io_uring (128-byte SQEs for the command, used by this thread alone,
  // its kernel work run when it waits), the buffers, and the poll of
  // `stop_fd` queued. False, logged (a missing io_uring at `refusal`), when
  // any is refused.
  bool set_up(size_t payload_bytes, int stop_fd, spdlog::level::level_enum refusal) {
    io_uring_params params{};
    params.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (const int error = io_uring_queue_init_params(4, &ring_, &params); error < 0) {
      spdlog::log(refusal, "FUSE over io_uring: no io_uring ({}); serving /dev/fuse",
                  std::strerror(-error));
      return false;
    }
    ring_ready_ = true;
    payload_bytes_ = payload_bytes;
    memory_bytes_ = 2 * page_bytes() + payload_bytes;
    memory_ = mmap(nullptr, memory_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory_ == MAP_FAILED) {
      spdlog::warn("FUSE over io_uring: cannot map a ring entry: {}", std::strerror(errno));
      return false;
    }
    // Small pages only: the pages given back (release_pages) must not come
    // back resident when khugepaged collapses the range into a huge page.
    madvise(memory_, memory_bytes_, MADV_NOHUGEPAGE);
    header_ = static_cast<RingRequestHeader*>(memory_);
    payload_ = static_cast<char*>(memory_) + 2 * page_bytes();
    iov_[0] = {header_, sizeof(RingRequestHeader)};
    iov_[1] = {payload_, payload_bytes_};
    // Read replies are built where they are sent from (this is the thread's
    // entry: set_up runs on it).
    read_replies_into({reinterpret_cast<std::byte*>(payload_), payload_bytes_});
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return false;
    io_uring_prep_poll_add(sqe, stop_fd, POLLIN);
    io_uring_sqe_set_data64(sqe, kStopTag);
    return true;
  }

  // Queues the entry's first command (REGISTER) or the reply to its request
  // with the fetch of the next (COMMIT_AND_FETCH); the next wait submits it.
  // False when the ring has no free slot, which two commands never fill.
  bool queue_command(uint32_t command, uint16_t queue, int fuse_fd) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return false;
    std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));  // a 128-byte SQE (IORING_SETUP_SQE128)
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = fuse_fd;
    sqe->cmd_op = command;
    sqe->user_data = kEntryTag;
    if (command == kCmdRegister) {
      sqe->addr = reinterpret_cast<uint64_t>(iov_);
      sqe->len = 2;
    }
    RingCommand body{};
    body.commit_id = command == kCmdCommitAndFetch ? unique_ : 0;
    body.qid = queue;
    std::memcpy(sqe->cmd, &body, sizeof body);
    return true;
  }

  // Registers the entry with queue `queue` (submitting what else is queued)
  // and tells whether the kernel took it: 0, or the errno it refused it with.
  // The kernel decides during the submission and posts a refusal before
  // io_uring_enter returns; a taken entry's completion comes with its first
  // request, in next(). An answer io_uring finds only later (a command its
  // workers retried after EAGAIN) comes in next() too.
  int register_with(uint16_t queue, int fuse_fd) {
    if (!queue_command(kCmdRegister, queue, fuse_fd)) return EBUSY;
    int submitted;
    while ((submitted = io_uring_submit(&ring_)) < 0) {
      if (submitted == -EINTR) continue;
      if (submitted != -EAGAIN && submitted != -EBUSY) return -submitted;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    io_uring_cqe* cqe = nullptr;
    if (io_uring_peek_cqe(&ring_, &cqe) != 0 || cqe == nullptr) return 0;
    if (io_uring_cqe_get_data64(cqe) != kEntryTag || cqe->res >= 0) return 0;
    const int error = -cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return error;
  }

  // Submits what is queued and waits for the next completion. A system call
  // refused for now (EINTR, EAGAIN, EBUSY) is made again: what was queued
  // stays queued. Any other refusal is the error. An entry whose payload
  // pages a large request or reply reached gives them back after
  // kIdleBeforeRelease without a completion (release_pages).
  std::expected<Completion, int> next() {
    while (true) {
      int submitted = 0;
      if (reach_ == 0) {
        submitted = io_uring_submit_and_wait(&ring_, 1);
      } else {
        using std::chrono::duration_cast, std::chrono::seconds, std::chrono::nanoseconds;
        const auto whole = duration_cast<seconds>(kIdleBeforeRelease);
        const auto part = duration_cast<nanoseconds>(kIdleBeforeRelease - whole);
        __kernel_timespec idle{.tv_sec = whole.count(), .tv_nsec = part.count()};
        io_uring_cqe* ready = nullptr;
        submitted = io_uring_submit_and_wait_timeout(&ring_, &ready, 1, &idle, nullptr);
        // The wait ended without a completion: timed out, as -ETIME, or as
        // the count submitted when the call also submitted (the kernel then
        // drops the -ETIME, and liburing 2.3 passes the count on).
        if (submitted == -ETIME || (submitted >= 0 && ready == nullptr)) {
          release_pages();
          continue;
        }
      }
      if (submitted == -EAGAIN || submitted == -EBUSY) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (submitted < 0 && submitted != -EINTR) return std::unexpected(-submitted);
      io_uring_cqe* cqe = nullptr;
      if (io_uring_peek_cqe(&ring_, &cqe) != 0 || cqe == nullptr) continue;
      const Completion completion{io_uring_cqe_get_data64(cqe), cqe->res};
      io_uring_cqe_seen(&ring_, cqe);
      return completion;
    }
  }

  // Gives back the pages of the payload buffer that large requests and
  // replies reached (they read as zeros, and the kernel's next copy into
  // them faults them in again). Only while no request is in the buffer: the
  // kernel copies a request into it, and a reply out, only inside this
  // thread's io_uring_enter, and posts the completion before that call
  // returns. That rests on how fs/fuse/dev_uring.c is written (6.14 to 6.18),
  // not on its ABI: a request queued while the entry waits is copied in by
  // fuse_uring_send_in_task, task work that IORING_SETUP_DEFER_TASKRUN runs
  // only in this thread's waiting io_uring_enter; one already queued, by
  // fuse_uring_commit_fetch -> fuse_uring_next_fuse_req within the commit's
  // submission; the reply is copied out by fuse_uring_commit, also within it.
  // A kernel that copied from another context, or pinned the buffer, would
  // need this dropped.
  void release_pages() noexcept {
    if (io_uring_cq_ready(&ring_) != 0) return;  // a completion came after all
    const size_t page = page_bytes();
    madvise(payload_, (reach_ + page - 1) / page * page, MADV_DONTNEED);
    reach_ = 0;
  }

  // Submits what is queued without waiting: a commit is done when this returns.
  void flush() { io_uring_submit(&ring_); }

  // Serves the request in the buffers through libfuse; the reply is in the
  // entry when this returns (EIO when libfuse sent none).
  void serve(fuse_session* session, FuseChannel& channel) {
    fuse_in_header in;
    std::memcpy(&in, header_->in_out, sizeof in);
    RingEntryInOut ring_in;
    std::memcpy(&ring_in, &header_->ring_ent_in_out, sizeof ring_in);
    unique_ = ring_in.commit_id;
    replied_ = false;
    // /dev/fuse delivers the header, every argument, then the payload, all of
    // in.len bytes; the ring puts the first argument (the operation's fixed
    // struct, which may be empty) in op_in and the rest in the payload.
    const size_t payload = ring_in.payload_sz;
    const size_t header_bytes = sizeof(fuse_in_header);
    if (in.len < header_bytes + payload || payload > payload_bytes_ ||
        in.len - header_bytes - payload > kOpInBytes) {
      spdlog::error("FUSE over io_uring: malformed request {} (length {}, payload {})", in.opcode,
                    in.len, payload);
      reply_error(EIO);
      return;
    }
    if (payload >= kLargeBytes) reach_ = std::max(reach_, payload);
    if (in.opcode == FUSE_READ) {
      // Built in the payload (read_replies_into) however the read ends: a failed one
      // may have filled part of it.
      fuse_read_in read;
      std::memcpy(&read, header_->op_in, sizeof read);
      if (read.size >= kLargeBytes) {
        reach_ = std::max(reach_, std::min<size_t>(read.size, payload_bytes_));
      }
    }
    const size_t fixed = in.len - header_bytes - payload;
    char* request = payload_ - fixed - header_bytes;
    std::memcpy(request, &in, header_bytes);
    std::memcpy(request + header_bytes, header_->op_in, fixed);
    channel.prepare_request(request, in.len);
    fuse_buf buffer{};
    buffer.size = in.len;
    buffer.mem = request;
    current_ = this;
    fuse_session_process_buf(session, &buffer);
    current_ = nullptr;
    if (!replied_) {
      spdlog::error("FUSE over io_uring: request {} (opcode {}) got no reply; EIO", unique_,
                    in.opcode);
      reply_error(EIO);
    }
  }

  static bool serving() noexcept { return current_ != nullptr; }

  // The reply libfuse writes for the request this thread serves (take_reply).
  static bool take(const iovec* iov, int count) noexcept {
    Entry* self = current_;
    if (self == nullptr || count < 1 || iov[0].iov_len < sizeof(fuse_out_header)) return false;
    fuse_out_header out;
    std::memcpy(&out, iov[0].iov_base, sizeof out);
    // Another request's reply (an INTERRUPT's EAGAIN) or a notification (0).
    if (out.unique != self->unique_) return false;
    self->copy_reply(out, iov + 1, count - 1);
    return true;
  }

 private:
  void copy_reply(fuse_out_header out, const iovec* arguments, int count) noexcept {
    size_t total = 0;
    bool overlaps = false;
    for (int i = 0; i < count; ++i) {
      const auto* base = static_cast<const char*>(arguments[i].iov_base);
      // Already where it goes: a read's data (read_replies_into, in set_up).
      const bool in_place = base == payload_ + total;
      overlaps |= !in_place && base < payload_ + payload_bytes_ &&
                  base + arguments[i].iov_len > payload_;
      total += arguments[i].iov_len;
    }
    // A reply gathered from elsewhere in the request's own buffer could
    // overwrite a part before copying it; no reply of mimicfs's or libfuse's
    // points there.
    if (total > payload_bytes_ || overlaps) {
      spdlog::error("FUSE over io_uring: a reply of {} bytes {}; EIO", total,
                    overlaps ? "points into its request" : "exceeds the entry");
      reply_error(EIO);
      return;
    }
    if (total >= kLargeBytes) reach_ = std::max(reach_, total);
    char* to = payload_;
    for (int i = 0; i < count; ++i) {
      if (arguments[i].iov_base != to) std::memcpy(to, arguments[i].iov_base, arguments[i].iov_len);
      to += arguments[i].iov_len;
    }
    set_reply(out, total);
  }

  void reply_error(int error) noexcept {
    fuse_out_header out{};
    out.len = sizeof out;
    out.error = -error;
    out.unique = unique_;
    set_reply(out, 0);
  }

  void set_reply(const fuse_out_header& out, size_t payload) noexcept {
    std::memcpy(header_->in_out, &out, sizeof out);
    RingEntryInOut ring_out{};
    ring_out.commit_id = unique_;
    ring_out.payload_sz = static_cast<uint32_t>(payload);
    std::memcpy(&header_->ring_ent_in_out, &ring_out, sizeof ring_out);
    replied_ = true;
  }

  static thread_local Entry* current_;

  io_uring ring_{};
  bool ring_ready_ = false;
  void* memory_ = MAP_FAILED;
  size_t memory_bytes_ = 0;
  size_t payload_bytes_ = 0;
  RingRequestHeader* header_ = nullptr;
  char* payload_ = nullptr;
  iovec iov_[2] = {};
  uint64_t unique_ = 0;  // the request in the buffers
  bool replied_ = false;
  // How far into the payload buffer large requests and replies reached since
  // its pages were last given back (0: only small ones, whose few pages stay).
  size_t reach_ = 0;
};

thread_local FuseRing::Entry* FuseRing::Entry::current_ = nullptr;

FuseRing::FuseRing(fuse_session* session, FuseChannel& channel)
    : session_(session), channel_(channel) {}

FuseRing::~FuseRing() { stop(); }

bool FuseRing::prepare(size_t payload_bytes, bool asked_for) {
  refusal_ = asked_for ? spdlog::level::warn : spdlog::level::info;
  const auto cpus = possible_cpus();
  if (!cpus) {
    spdlog::log(refusal_,
                "FUSE over io_uring: the possible CPUs are numbered with gaps; serving /dev/fuse");
    return false;
  }
  if (*cpus > kMaxQueues) {
    spdlog::log(refusal_, "FUSE over io_uring: {} possible CPUs, more than {}; serving /dev/fuse",
                *cpus, kMaxQueues);
    return false;
  }
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    spdlog::warn("FUSE over io_uring: no eventfd: {}; serving /dev/fuse", std::strerror(errno));
    return false;
  }
  const size_t page = page_bytes();
  payload_bytes_ = (payload_bytes + page - 1) / page * page;
  queue_count_ = *cpus;
  std::vector<std::future<bool>> set_up;
  {
    std::lock_guard lock(mutex_);
    for (size_t queue = 0; queue < queue_count_; ++queue) {
      for (int i = 0; i < kEntriesPerQueue; ++i) {
        std::promise<bool> ready;
        set_up.push_back(ready.get_future());
        try {
          threads_.emplace_back(&FuseRing::serve, this, static_cast<uint16_t>(queue),
                                std::move(ready));
        } catch (const std::system_error& e) {  // no thread to be had
          spdlog::warn("FUSE over io_uring: cannot start a thread: {}", e.what());
          set_up.pop_back();
          set_up.push_back(std::async(std::launch::deferred, [] { return false; }));
        }
      }
    }
  }
  bool all = true;
  for (auto& result : set_up) all = result.get() && all;
  if (!all) stop();
  return all;
}

void FuseRing::start() {
  {
    std::lock_guard lock(mutex_);
    serving_ = true;  // before any thread registers: one refused may turn it false
    started_ = true;
  }
  started_or_stopping_.notify_all();
  spdlog::info("FUSE over io_uring: {} queues, one per CPU, of {} entries", queue_count_,
               kEntriesPerQueue);
}

void FuseRing::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    stop_requested_ = true;
    threads.swap(threads_);
  }
  started_or_stopping_.notify_all();
  if (stop_fd_ >= 0) (void)eventfd_write(stop_fd_, 1);  // every thread's poll completes
  for (auto& thread : threads) thread.join();
  if (stop_fd_ >= 0) close(stop_fd_);
  stop_fd_ = -1;
  serving_ = false;
}

bool FuseRing::take_reply(const iovec* iov, int count) noexcept { return Entry::take(iov, count); }

bool FuseRing::on_ring_thread() noexcept { return Entry::serving(); }

bool FuseRing::wait_for_start() {
  std::unique_lock lock(mutex_);  // for the condition variable: the analysis
  assert_held(mutex_);            // sees lock_guard's only
  while (!started_ && !stopping_) started_or_stopping_.wait(lock);
  return !stopping_;
}

void FuseRing::keep_to_cpu(uint16_t queue) {
  cpu_set_t cpu;
  CPU_ZERO(&cpu);
  CPU_SET(queue, &cpu);
  if (const int error = pthread_setaffinity_np(pthread_self(), sizeof cpu, &cpu); error != 0) {
    // A CPU outside the daemon's cpuset: its queue gets no request of a
    // caller in the same set. At the normal policy: unpinned, SCHED_IDLE
    // would only lose CPU time.
    spdlog::debug("FUSE over io_uring: queue {} not pinned to its CPU: {}", queue,
                  std::strerror(error));
    return;
  }
  // A thread started from here would inherit the CPU and the policy (and the
  // name): none is (FuseAdapter::start).
  const sched_param priority{};
  if (sched_setscheduler(0, SCHED_IDLE, &priority) != 0) {
    spdlog::debug("FUSE over io_uring: queue {} kept at the normal policy: {}", queue,
                  std::strerror(errno));
  }
}

void FuseRing::fail(uint16_t queue, const char* what, int error) {
  if (stop_requested_) return;
  spdlog::error("FUSE over io_uring: queue {}: {}: {}; the daemon stops, its callers get ENOTCONN",
                queue, what, std::strerror(error));
  kill(getpid(), SIGTERM);
}

void FuseRing::refused(uint16_t queue, int error) {
  if (stop_requested_) return;
  int left;
  {
    std::lock_guard lock(mutex_);
    left = kEntriesPerQueue - ++refused_[queue];
  }
  if (left > 0) {
    // Fewer entries than a frozen volume holds operations, and a restart
    // sent from this CPU waits behind them (kEntriesPerQueue).
    spdlog::warn("FUSE over io_uring: queue {}: the kernel refused an entry: {}; the queue serves "
                 "with the {} others{}",
                 queue, std::strerror(error), left,
                 left < kEntriesPerQueue - 1
                     ? " (a restart from its CPU may wait behind 8 operations on a frozen volume)"
                     : "");
    return;
  }
  // Without an entry in every queue the kernel never turns to the ring, and
  // once it refused one it no longer waits for it: /dev/fuse serves, and the
  // other queues' threads end.
  spdlog::warn("FUSE over io_uring: queue {}: the kernel refused every entry (the last: {}); "
               "serving /dev/fuse",
               queue, std::strerror(error));
  serving_ = false;
  (void)eventfd_write(stop_fd_, 1);
}

void FuseRing::serve(uint16_t queue, std::promise<bool> ready) {
  const std::string name = fmt::format("mimicfs-ring-{}", queue);
  pthread_setname_np(pthread_self(), name.c_str());
  keep_to_cpu(queue);
  Entry entry;
  const bool set_up = entry.set_up(payload_bytes_, stop_fd_, refusal_);
  ready.set_value(set_up);
  if (!set_up || !wait_for_start()) return;
  const int fuse_fd = fuse_session_fd(session_);
  // ENOTCONN or ECONNABORTED: unmounted already. Otherwise (ENOMEM; EINVAL
  // would be a bug of ours) the thread ends, and the kernel serves without
  // this entry.
  const auto unmounted = [](int error) { return error == ENOTCONN || error == ECONNABORTED; };
  const auto registered = [&] {
    const int error = entry.register_with(queue, fuse_fd);
    if (error != 0 && !unmounted(error)) refused(queue, error);
    return error == 0;
  };
  if (!registered()) return;
  bool served = false;
  while (true) {
    const auto completion = entry.next();
    if (!completion) return fail(queue, "io_uring_enter", completion.error());
    if (completion->tag == kStopTag) return;
    const int result = completion->result;
    if (result < 0 && !served && !unmounted(-result)) {
      // The registration's own answer, come late (a command io_uring retried
      // from its workers): EAGAIN before the kernel took INIT's reply in,
      // which it did before the reply's write returned; any other error
      // before a first request is the registration's too (6.14 to 6.18).
      if (result != -EAGAIN) return refused(queue, -result);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!registered()) return;
      continue;
    }
    if (result < 0) {
      if (!unmounted(-result)) fail(queue, "a ring command", -result);
      return;
    }
    served = true;
    requests_.fetch_add(1, std::memory_order_relaxed);
    entry.serve(session_, channel_);
    if (!entry.queue_command(kCmdCommitAndFetch, queue, fuse_fd)) {
      return fail(queue, "commit", EBUSY);
    }
    if (stop_requested_) {
      entry.flush();  // the reply: its caller is waiting for it
      return;
    }
  }
}

}  // namespace mimicfs
