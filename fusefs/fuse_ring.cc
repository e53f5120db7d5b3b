#include "fusefs/fuse_ring.h"

#include <fmt/format.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "fusefs/fuse_channel.h"

namespace mimicfs {
namespace {

// The kernel's ABI for FUSE over io_uring (include/uapi/linux/fuse.h, 7.42),
// which Debian 12's linux/fuse.h (6.1) predates.
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
static_assert(sizeof(RingEntryInOut) == 32 && sizeof(RingCommand) == 24);

// How long a waiting thread sleeps before it looks at stop_requested_.
constexpr auto kWaitTimeout = std::chrono::milliseconds(200);

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

struct FuseRing::Queue {
  explicit Queue(uint16_t id) : id(id) {}
  const uint16_t id;            // the qid, and the CPU its threads run on
  std::atomic<int> waiting{0};  // entries registered and waiting for a request
  std::atomic<int> threads{0};
};

// One thread's io_uring and ring entry: the header buffer, a page of room in
// front of the payload (where the request is rebuilt), and the payload.
class FuseRing::Entry {
 public:
  Entry() = default;
  ~Entry() {
    if (ring_ready_) io_uring_queue_exit(&ring_);
    if (memory_ != MAP_FAILED) munmap(memory_, memory_bytes_);
  }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

  // The io_uring (128-byte SQEs for the command, used by this thread alone)
  // and the buffers. False, logged, when either is refused.
  bool set_up(size_t payload_bytes) {
    io_uring_params params{};
    params.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (const int error = io_uring_queue_init_params(4, &ring_, &params); error < 0) {
      spdlog::info("FUSE over io_uring: no io_uring ({}); serving /dev/fuse",
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
    header_ = static_cast<RingRequestHeader*>(memory_);
    payload_ = static_cast<char*>(memory_) + 2 * page_bytes();
    iov_[0] = {header_, sizeof(RingRequestHeader)};
    iov_[1] = {payload_, payload_bytes_};
    return true;
  }

  // Queues the entry's first command (REGISTER) or the reply to its request
  // with the fetch of the next (COMMIT_AND_FETCH); the next wait submits it.
  void queue_command(uint32_t command, uint16_t qid, int fuse_fd) {
    // One command at a time: the ring's 4 slots are never all in use.
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) throw std::runtime_error("io_uring: no submission slot");
    }
    std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));  // 128-byte SQEs (IORING_SETUP_SQE128)
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = fuse_fd;
    sqe->cmd_op = command;
    if (command == kCmdRegister) {
      sqe->addr = reinterpret_cast<uint64_t>(iov_);
      sqe->len = 2;
    }
    RingCommand body{};
    body.commit_id = command == kCmdCommitAndFetch ? unique_ : 0;
    body.qid = qid;
    std::memcpy(sqe->cmd, &body, sizeof body);
  }

  // Submits what is queued and waits up to kWaitTimeout for the next
  // completion: its result (0: a request is in the buffers; a negative errno:
  // the command failed), or nullopt when none came (or a signal came first).
  std::optional<int> submit_and_wait() {
    __kernel_timespec timeout{};
    timeout.tv_nsec = std::chrono::nanoseconds(kWaitTimeout).count();
    io_uring_cqe* cqe = nullptr;
    const int submitted = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &timeout, nullptr);
    if (submitted == -ETIME || submitted == -EINTR) return std::nullopt;
    if (submitted < 0) return submitted;
    if (cqe == nullptr) return std::nullopt;
    const int result = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return result;
  }

  // Submits what is queued without waiting: a commit is done when this returns.
  void submit() { io_uring_submit(&ring_); }

  // Serves the request in the buffers through libfuse; the reply is in the
  // entry when this returns (EIO when libfuse sent none).
  void serve(fuse_session* session) {
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
    const size_t fixed = in.len - header_bytes - payload;
    char* request = payload_ - fixed - header_bytes;
    std::memcpy(request, &in, header_bytes);
    std::memcpy(request + header_bytes, header_->op_in, fixed);
    fuse_channel::prepare_request(request, in.len);
    fuse_buf buffer{};
    buffer.size = in.len;
    buffer.mem = request;
    serving_ = this;
    fuse_session_process_buf(session, &buffer);
    serving_ = nullptr;
    if (!replied_) {
      spdlog::error("FUSE over io_uring: request {} (opcode {}) got no reply; EIO", unique_,
                    in.opcode);
      reply_error(EIO);
    }
  }

  // The reply libfuse writes for the request this thread serves (take_reply).
  static bool take(const iovec* iov, int count) {
    Entry* self = serving_;
    if (self == nullptr || count < 1 || iov[0].iov_len < sizeof(fuse_out_header)) return false;
    fuse_out_header out;
    std::memcpy(&out, iov[0].iov_base, sizeof out);
    // Another request's reply (an INTERRUPT's EAGAIN) or a notification (0).
    if (out.unique != self->unique_) return false;
    self->copy_reply(out, iov + 1, count - 1);
    return true;
  }

 private:
  void copy_reply(fuse_out_header out, const iovec* arguments, int count) {
    size_t total = 0;
    bool overlaps = false;
    for (int i = 0; i < count; ++i) {
      total += arguments[i].iov_len;
      const auto* base = static_cast<const char*>(arguments[i].iov_base);
      overlaps |= base < payload_ + payload_bytes_ && base + arguments[i].iov_len > payload_;
    }
    if (total > payload_bytes_) {
      spdlog::error("FUSE over io_uring: a reply of {} bytes exceeds the entry's {}; EIO", total,
                    payload_bytes_);
      reply_error(EIO);
      return;
    }
    // A reply pointing into the request (none of mimicfs's do) is gathered
    // first, so that no argument is overwritten before it is copied.
    std::vector<char> gathered;
    if (overlaps) {
      gathered.reserve(total);
      for (int i = 0; i < count; ++i) {
        const auto* base = static_cast<const char*>(arguments[i].iov_base);
        gathered.insert(gathered.end(), base, base + arguments[i].iov_len);
      }
      std::memcpy(payload_, gathered.data(), total);
    } else {
      char* to = payload_;
      for (int i = 0; i < count; ++i) {
        std::memcpy(to, arguments[i].iov_base, arguments[i].iov_len);
        to += arguments[i].iov_len;
      }
    }
    set_reply(out, total);
  }

  void reply_error(int error) {
    fuse_out_header out{};
    out.len = sizeof out;
    out.error = -error;
    out.unique = unique_;
    set_reply(out, 0);
  }

  void set_reply(const fuse_out_header& out, size_t payload) {
    std::memcpy(header_->in_out, &out, sizeof out);
    RingEntryInOut ring_out{};
    ring_out.commit_id = unique_;
    ring_out.payload_sz = static_cast<uint32_t>(payload);
    std::memcpy(&header_->ring_ent_in_out, &ring_out, sizeof ring_out);
    replied_ = true;
  }

  static thread_local Entry* serving_;

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
};

thread_local FuseRing::Entry* FuseRing::Entry::serving_ = nullptr;

FuseRing::FuseRing(fuse_session* session) : session_(session) {}

FuseRing::~FuseRing() { stop(); }

bool FuseRing::prepare(size_t payload_bytes) {
  const auto cpus = possible_cpus();
  if (!cpus || *cpus > 0xFFFF) {
    spdlog::info("FUSE over io_uring: the possible CPUs are numbered with gaps; serving /dev/fuse");
    return false;
  }
  const size_t page = page_bytes();
  payload_bytes_ = (payload_bytes + page - 1) / page * page;
  queue_count_ = *cpus;
  for (size_t i = 0; i < queue_count_; ++i) {
    queues_.push_back(std::make_unique<Queue>(static_cast<uint16_t>(i)));
  }
  std::vector<std::future<bool>> set_up;
  {
    std::lock_guard lock(mutex_);
    for (auto& queue : queues_) {
      auto ready = std::make_shared<std::promise<bool>>();
      set_up.push_back(ready->get_future());
      add_thread(*queue, std::move(ready));
    }
  }
  bool all = true;
  for (auto& result : set_up) all = result.get() && all;
  if (!all) {
    stop();
    return false;
  }
  return true;
}

void FuseRing::start() {
  {
    std::lock_guard lock(mutex_);
    started_ = true;
  }
  started_or_stopping_.notify_all();
  spdlog::info(
      "FUSE over io_uring: {} queues, one per CPU; each request is served on its "
      "caller's CPU",
      queue_count_);
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
  for (auto& thread : threads) thread.join();
}

int FuseRing::threads() const {
  int total = 0;
  for (const auto& queue : queues_) total += queue->threads.load();
  return total;
}

bool FuseRing::take_reply(const iovec* iov, int count) { return Entry::take(iov, count); }

void FuseRing::add_thread(Queue& queue, std::shared_ptr<std::promise<bool>> ready) {
  if (stopping_ || queue.threads.load() >= kMaxThreadsPerQueue) {
    if (ready) ready->set_value(false);
    return;
  }
  queue.threads.fetch_add(1);
  try {
    threads_.emplace_back([this, &queue, ready] { serve(queue, ready); });
  } catch (const std::exception& e) {  // std::system_error: no thread to be had
    queue.threads.fetch_sub(1);
    spdlog::warn("FUSE over io_uring: cannot start a thread for queue {}: {}", queue.id, e.what());
    if (ready) ready->set_value(false);
  }
}

bool FuseRing::wait_for_start() {
  std::unique_lock lock(mutex_);  // for the condition variable: the analysis
  assert_held(mutex_);            // sees lock_guard's only
  while (!started_ && !stopping_) started_or_stopping_.wait(lock);
  return !stopping_;
}

void FuseRing::serve(Queue& queue, std::shared_ptr<std::promise<bool>> ready) {
  const std::string name = fmt::format("mimicfs-ring-{}", queue.id);
  pthread_setname_np(pthread_self(), name.c_str());
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(queue.id, &cpus);
  if (const int error = pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus); error != 0) {
    // Offline, or outside this process's cpuset: the queue gets no request anyway.
    spdlog::debug("FUSE over io_uring: cannot run on CPU {}: {}", queue.id, std::strerror(error));
  }
  Entry entry;
  const bool set_up = entry.set_up(payload_bytes_);
  if (ready) ready->set_value(set_up);
  if (!set_up || !wait_for_start()) {
    queue.threads.fetch_sub(1);
    return;
  }
  const int fuse_fd = fuse_session_fd(session_);
  entry.queue_command(kCmdRegister, queue.id, fuse_fd);
  queue.waiting.fetch_add(1);
  while (true) {
    const std::optional<int> result = entry.submit_and_wait();
    if (!result) {
      if (stop_requested_) break;
      continue;
    }
    if (*result == -EAGAIN) {
      // The kernel has not taken the INIT reply in yet: register again.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      entry.queue_command(kCmdRegister, queue.id, fuse_fd);
      continue;
    }
    if (*result < 0) {
      // ENOTCONN or ECONNABORTED: the unmount tore the ring down.
      if (*result != -ENOTCONN && *result != -ECONNABORTED && !stop_requested_) {
        spdlog::warn("FUSE over io_uring: queue {} stops: {}", queue.id, std::strerror(-*result));
      }
      break;
    }
    // The last waiting entry of this CPU is taken: one more, so that the next
    // request from here is not held up by this one.
    if (queue.waiting.fetch_sub(1) == 1) {
      std::lock_guard lock(mutex_);
      add_thread(queue, nullptr);
    }
    entry.serve(session_);
    entry.queue_command(kCmdCommitAndFetch, queue.id, fuse_fd);
    queue.waiting.fetch_add(1);
    if (stop_requested_) {
      entry.submit();  // the reply: its caller is waiting for it
      break;
    }
  }
  queue.waiting.fetch_sub(1);
  queue.threads.fetch_sub(1);
}

}  // namespace mimicfs
