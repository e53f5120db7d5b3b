// SPDX-License-Identifier: Apache-2.0
// RequestBuffers (fusefs/request_buffers.h): a worker waiting in read(2) gives
// its buffers' pages back when asked, and no request is lost or damaged by it.
// A SOCK_SEQPACKET socket stands in for /dev/fuse: each read returns one whole
// message, as /dev/fuse returns one whole request.
#include "fusefs/request_buffers.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mimicfs {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBufferBytes = (1 << 20) + 4096;  // libfuse's: max_write and a page
constexpr size_t kMessageBytes = 96 << 10;         // a large request, within a socket's buffer

// Resident pages among the whole pages of [data, data + length).
size_t resident_pages(const void* data, size_t length) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (start + page - 1) / page * page;
  const uintptr_t end = (start + length) / page * page;
  std::vector<unsigned char> present((end - begin) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(begin), end - begin, present.data()), 0);
  size_t count = 0;
  for (unsigned char p : present) count += p & 1;
  return count;
}

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Whether `condition` comes true while release_idle() is asked again every
// 10 ms, as the daemon's trimmer asks every second: a signal that reaches the
// worker after it said it waits but before its read(2) began ends no read
// (under ThreadSanitizer, which runs handlers at the next intercepted call,
// read's, that is the usual case), and the worker gets it again only at the
// second call that finds it so.
bool released_eventually(const std::function<bool()>& condition) {
  auto last_ask = std::chrono::steady_clock::now();
  return eventually([&] {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() - last_ask >= 10ms) {
      request_buffers::release_idle();
      last_ask = std::chrono::steady_clock::now();
    }
    return false;
  });
}

// Message `number`: its number, then bytes that differ from page to page and
// from message to message.
std::vector<char> message(size_t length, uint32_t number) {
  std::vector<char> bytes(length);
  for (size_t page = 0; page * 4096 < length; ++page) {
    std::memset(bytes.data() + page * 4096, static_cast<int>((number * 7 + page) % 251 + 1),
                std::min<size_t>(4096, length - page * 4096));
  }
  std::memcpy(bytes.data(), &number, std::min(sizeof number, length));
  return bytes;
}

// A worker thread serving messages from a socket as libfuse's loop serves
// requests: read into its buffer, then "serve" (check and count) each one;
// optionally it also fills a reply buffer of the message's size. Serving
// includes a sleep, a system call that a signal would end (EINTR).
class Worker {
 public:
  explicit Worker(bool replies = false) : replies_(replies) {
    int pair[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
    sender_ = pair[0];
    receiver_ = pair[1];
    buffer_ = static_cast<char*>(std::malloc(kBufferBytes));
    thread_ = std::thread([this] { serve(); });
  }
  ~Worker() {
    ::close(sender_);  // the worker's read returns 0: it ends
    thread_.join();
    ::close(receiver_);
    std::free(buffer_);
  }

  void send(const std::vector<char>& bytes) {
    ASSERT_EQ(::send(sender_, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }
  uint32_t served() const { return served_.load(); }
  uint32_t damaged() const { return damaged_.load(); }
  uint32_t interrupted() const { return interrupted_.load(); }
  // Reads that returned EINTR (request_buffers::end_wait).
  uint32_t ended_waits() const { return ended_waits_.load(); }
  pthread_t thread() { return thread_.native_handle(); }
  const char* buffer() const { return buffer_; }
  std::span<std::byte> reply() const {
    std::lock_guard lock(reply_mutex_);
    return reply_;
  }

 private:
  void serve() {
    for (;;) {
      const ssize_t n = request_buffers::read_request(receiver_, buffer_, kBufferBytes);
      if (n < 0 && errno == EINTR) {  // as the workers' loop does (fuse_workers.cc)
        ++ended_waits_;
        continue;
      }
      if (n <= 0) return;
      const uint32_t number = served_.load();
      const std::vector<char> expected = message(static_cast<size_t>(n), number);
      if (std::memcmp(buffer_, expected.data(), expected.size()) != 0) ++damaged_;
      const timespec pause{0, 20'000};
      if (nanosleep(&pause, nullptr) != 0 && errno == EINTR) ++interrupted_;
      if (replies_) {
        const std::span<std::byte> reply = request_buffers::reply_buffer(static_cast<size_t>(n));
        std::memset(reply.data(), 1, reply.size());
        std::lock_guard lock(reply_mutex_);
        reply_ = reply;
      }
      served_.store(number + 1);
    }
  }

  const bool replies_;
  int sender_ = -1;
  int receiver_ = -1;
  char* buffer_ = nullptr;
  std::atomic<uint32_t> served_{0};
  std::atomic<uint32_t> damaged_{0};
  std::atomic<uint32_t> interrupted_{0};
  std::atomic<uint32_t> ended_waits_{0};
  mutable std::mutex reply_mutex_;
  std::span<std::byte> reply_;
  std::thread thread_;
};

TEST(RequestBuffers, AWaitingWorkerGivesBackThePagesOfALargeRequest) {
  Worker worker;
  worker.send(message(kMessageBytes, 0));
  ASSERT_TRUE(eventually([&] { return worker.served() == 1; }));
  const size_t touched = kMessageBytes / 4096 - 1;
  EXPECT_GE(resident_pages(worker.buffer(), kMessageBytes), touched);

  // The worker is back in read(2) soon after serving: asked once there.
  ASSERT_TRUE(eventually([] { return request_buffers::release_idle() == 1; }));
  EXPECT_TRUE(
      released_eventually([&] { return resident_pages(worker.buffer(), kMessageBytes) == 0; }));
  EXPECT_EQ(request_buffers::release_idle(), 0u) << "nothing held any more";

  // It serves on: the next request arrives whole.
  worker.send(message(kMessageBytes, 1));
  ASSERT_TRUE(eventually([&] { return worker.served() == 2; }));
  EXPECT_EQ(worker.damaged(), 0u);
}

TEST(RequestBuffers, SmallRequestsKeepTheirFewPages) {
  Worker worker;
  worker.send(message(request_buffers::kLargeBytes - 1, 0));
  ASSERT_TRUE(eventually([&] { return worker.served() == 1; }));
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(request_buffers::release_idle(), 0u);
  EXPECT_EQ(worker.damaged(), 0u);
}

TEST(RequestBuffers, TheReplyBufferGoesBackWithTheRequestBuffer) {
  Worker worker(/*replies=*/true);
  worker.send(message(kMessageBytes, 0));
  ASSERT_TRUE(eventually([&] { return worker.served() == 1; }));
  const std::span<std::byte> reply = worker.reply();
  ASSERT_EQ(reply.size(), kMessageBytes);
  EXPECT_GE(resident_pages(reply.data(), reply.size()), kMessageBytes / 4096 - 1);

  ASSERT_TRUE(eventually([] { return request_buffers::release_idle() == 1; }));
  EXPECT_TRUE(released_eventually([&] {
    return resident_pages(reply.data(), reply.size()) == 0 &&
           resident_pages(worker.buffer(), kMessageBytes) == 0;
  }));
}

// A FUSE over io_uring thread builds its read replies in its entry's payload
// buffer (fuse_ring.cc): every reply that fits is given the area itself, from
// its start; a larger one, and every reply once the area is taken back, the
// thread's own buffer.
TEST(RequestBuffers, RepliesThatFitAreBuiltInTheAreaGiven) {
  std::thread([] {
    std::vector<std::byte> area(64 << 10);
    request_buffers::reply_in(area);
    for (const size_t size : {size_t{1}, size_t{4096}, area.size()}) {
      const std::span<std::byte> reply = request_buffers::reply_buffer(size);
      EXPECT_EQ(reply.data(), area.data()) << size;
      EXPECT_EQ(reply.size(), size);
    }
    const std::span<std::byte> larger = request_buffers::reply_buffer(area.size() + 1);
    EXPECT_EQ(larger.size(), area.size() + 1);
    EXPECT_TRUE(larger.data() + larger.size() <= area.data() ||
                larger.data() >= area.data() + area.size());
    request_buffers::reply_in({});
    EXPECT_NE(request_buffers::reply_buffer(16).data(), area.data());
  }).join();
}

// Sends 1000 messages of varied sizes back to back while `race` runs again and
// again on another thread: the worker serves them all, and none is damaged or
// has a system call of its serving interrupted.
template <typename Race>
void ExpectRacingRequestsLoseNothing(Worker& worker, Race&& race) {
  std::atomic<bool> done{false};
  std::thread racer([&] {
    while (!done.load()) race();
  });
  constexpr uint32_t kMessages = 1000;
  for (uint32_t i = 0; i < kMessages; ++i) {
    worker.send(message(kMessageBytes - (i % 7) * 4096, i));
    if (i % 16 == 0) std::this_thread::yield();
  }
  EXPECT_TRUE(eventually([&] { return worker.served() == kMessages; }));
  done = true;
  racer.join();
  EXPECT_EQ(worker.damaged(), 0u);
  EXPECT_EQ(worker.interrupted(), 0u);
  EXPECT_EQ(request_buffers::release_signals_missed(), 0u) << "a worker waited for a signal never sent";
}

// Releases asked for as fast as they can be, while requests arrive back to
// back: asked between a read's return and its request being served, or
// while the kernel copies one in, the worker loses and damages nothing, and
// no system call of its serving is interrupted.
TEST(RequestBuffers, ReleasesRacingRequestsLoseNothing) {
  Worker worker;
  std::atomic<uint64_t> asked{0};
  ExpectRacingRequestsLoseNothing(worker, [&] { asked += request_buffers::release_idle(); });
  EXPECT_GT(asked.load(), 0u) << "the race was never run";
}

// end_wait (FuseWorkers ending a worker): the worker's wait in read(2) ends
// with EINTR, and it serves what comes next as before.
TEST(RequestBuffers, EndWaitEndsAWorkersWaitInRead) {
  Worker worker;
  worker.send(message(4096, 0));
  ASSERT_TRUE(eventually([&] { return worker.served() == 1; }));
  // Asked again until it lands: a signal that came just before the read began
  // leaves it waiting (as release_idle's, above).
  EXPECT_TRUE(eventually([&] {
    request_buffers::end_wait(worker.thread());
    return worker.ended_waits() >= 1;
  }));
  worker.send(message(4096, 1));
  EXPECT_TRUE(eventually([&] { return worker.served() == 2; }));
  EXPECT_EQ(worker.damaged(), 0u);
  request_buffers::end_wait(pthread_self());  // no worker: nothing happens
}

// Ends of waits asked for as fast as they can be, while requests arrive back
// to back: no request is lost or damaged, no system call of its serving is
// interrupted, and the waits asked to end do.
TEST(RequestBuffers, EndWaitsRacingRequestsLoseNothing) {
  Worker worker;
  ExpectRacingRequestsLoseNothing(worker, [&] { request_buffers::end_wait(worker.thread()); });
  EXPECT_GT(worker.ended_waits(), 0u) << "the race was never run";
}

}  // namespace
}  // namespace mimicfs
