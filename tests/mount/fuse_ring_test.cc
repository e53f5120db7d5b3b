// SPDX-License-Identifier: Apache-2.0
// FUSE over io_uring (fusefs/fuse_ring.h) through a real mount: with
// `--io-uring on` and a kernel that offers the ring (module parameter
// fuse.enable_uring) the daemon serves each CPU's queue from threads of its
// own, requests from every CPU are answered through it, and requests waiting
// on one CPU do not hold up the next from it. With `--io-uring off` the daemon
// serves /dev/fuse alone.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

// FuseRing::kEntriesPerQueue: the 8 operations a frozen volume holds, the 4
// lock requests that may wait, a restart and one to spare.
constexpr int kEntriesPerQueue = 14;

bool kernel_offers_io_uring() {
  std::ifstream parameter("/sys/module/fuse/parameters/enable_uring");
  std::string value;
  return std::getline(parameter, value) && value == "Y";
}

// Skips where the kernel does not offer the ring, unless MIMICFS_REQUIRE_IO_URING=1
// (CI turns the module parameter on, and must not pass by skipping).
#define MIMICFS_REQUIRE_IO_URING()                                                        \
  do {                                                                                    \
    if (!kernel_offers_io_uring()) {                                                      \
      const char* required = std::getenv("MIMICFS_REQUIRE_IO_URING");                     \
      if (required != nullptr && std::string(required) == "1") {                          \
        FAIL() << "fuse.enable_uring is not Y";                                           \
      }                                                                                   \
      GTEST_SKIP() << "the kernel does not offer FUSE over io_uring (fuse.enable_uring)"; \
    }                                                                                     \
  } while (0)

int cpus() { return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)); }

// The daemon serving `mountpoint`: the process with /dev/fuse open whose
// arguments name it.
pid_t daemon_of(const std::string& mountpoint) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (dirent* entry = readdir(proc)) {
    const std::string pid = entry->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline("/proc/" + pid + "/cmdline");
    std::string argument;
    bool names_it = false;
    while (std::getline(cmdline, argument, '\0')) names_it |= argument == mountpoint;
    if (!names_it) continue;
    const std::string fds = "/proc/" + pid + "/fd";
    if (DIR* dir = opendir(fds.c_str())) {
      while (dirent* fd = readdir(dir)) {
        char target[64] = {};
        const std::string link = fds + "/" + fd->d_name;
        if (readlink(link.c_str(), target, sizeof target - 1) > 0 &&
            std::string(target) == "/dev/fuse") {
          found = static_cast<pid_t>(std::stoi(pid));
        }
      }
      closedir(dir);
    }
  }
  closedir(proc);
  return found;
}

// The daemon's threads: id and name.
std::vector<std::pair<pid_t, std::string>> threads_of(pid_t daemon) {
  std::vector<std::pair<pid_t, std::string>> threads;
  const std::string tasks = "/proc/" + std::to_string(daemon) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return threads;
  while (dirent* task = readdir(dir)) {
    if (task->d_name[0] == '.') continue;
    std::ifstream comm(tasks + "/" + task->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name)) threads.emplace_back(std::stoi(task->d_name), name);
  }
  closedir(dir);
  return threads;
}

// How many of the daemon's threads bear each name.
std::map<std::string, int> thread_names(pid_t daemon) {
  std::map<std::string, int> names;
  for (const auto& [tid, name] : threads_of(daemon)) ++names[name];
  return names;
}

bool run_on_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// A file written, synced and read back by a thread on `cpu`; true when every
// call succeeded and the contents came back.
bool write_and_read_back_on_cpu(const std::string& path, int cpu) {
  bool ok = false;
  std::thread([&] {
    if (!run_on_cpu(cpu)) return;
    const std::string text = "written on CPU " + std::to_string(cpu);
    const int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0) return;
    std::string back(text.size(), '\0');
    ok = pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
         fsync(fd) == 0 &&
         pread(fd, back.data(), back.size(), 0) == static_cast<ssize_t>(back.size()) &&
         back == text;
    ok = close(fd) == 0 && ok;
  }).join();
  return ok;
}

// Runs `work` on a thread of its own, on `cpu`.
template <typename Work>
void on_cpu(int cpu, Work&& work) {
  std::thread([&] {
    if (run_on_cpu(cpu)) work();
  }).join();
}

TEST(FuseRing, EachCpuHasAQueueServedOnItsOwnThreads) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MIMICFS_REQUIRE_IO_URING();
  MountedVolume vol("ext4", {"--io-uring", "on"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const nlohmann::json before = vol.stats()["fuse"];
  EXPECT_EQ(before["transport"], "io_uring");
  EXPECT_GE(before["ring_queues"].get<int>(), cpus());
  for (int cpu = 0; cpu < cpus(); ++cpu) {
    EXPECT_TRUE(write_and_read_back_on_cpu(vol.file("f" + std::to_string(cpu)), cpu)) << cpu;
  }
  // Each CPU's create, write, fsync, read and close came through the ring.
  const nlohmann::json after = vol.stats()["fuse"];
  EXPECT_GE(after["ring_requests"].get<int>() - before["ring_requests"].get<int>(), 4 * cpus());
  EXPECT_EQ(vol.stats()["ops"]["fsync"]["count"], cpus());
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  const auto names = thread_names(daemon);
  for (int cpu = 0; cpu < cpus(); ++cpu) {
    EXPECT_EQ(names.count("mimicfs-ring-" + std::to_string(cpu)), 1u) << "CPU " << cpu;
    if (names.count("mimicfs-ring-" + std::to_string(cpu)) == 1) {
      EXPECT_EQ(names.at("mimicfs-ring-" + std::to_string(cpu)), kEntriesPerQueue)
          << "entries of CPU " << cpu;
    }
  }
}

// Each queue's threads keep to its CPU at the SCHED_IDLE policy, so that the
// caller a reply wakes stays on its CPU (fusefs/fuse_ring.h): where the CPU
// is the daemon's to use, as every CPU of a test machine is.
TEST(FuseRing, EachQueuesThreadsArePinnedToItsCpuAtTheIdlePolicy) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MIMICFS_REQUIRE_IO_URING();
  MountedVolume vol("ext4", {"--io-uring", "on"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(vol.stats()["fuse"]["transport"], "io_uring");
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  cpu_set_t ours;
  ASSERT_EQ(sched_getaffinity(0, sizeof ours, &ours), 0);
  int ring_threads = 0;
  const std::string prefix = "mimicfs-ring-";
  for (const auto& [tid, name] : threads_of(daemon)) {
    if (name.rfind(prefix, 0) != 0) continue;
    const int queue = std::stoi(name.substr(prefix.size()));
    if (!CPU_ISSET(queue, &ours)) continue;  // not this test's to check
    ++ring_threads;
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(tid, sizeof set, &set), 0) << name;
    EXPECT_EQ(CPU_COUNT(&set), 1) << name;
    EXPECT_TRUE(CPU_ISSET(queue, &set)) << name;
    EXPECT_EQ(sched_getscheduler(tid), SCHED_IDLE) << name;
  }
  EXPECT_EQ(ring_threads, CPU_COUNT(&ours) * kEntriesPerQueue);
}

// Only the ring's threads keep to one CPU at SCHED_IDLE: the thread that tells
// the kernel what a crash inside an operation undid, started for a crash that
// a ring thread served, keeps the daemon's CPUs and the normal policy.
TEST(FuseRing, NoOtherThreadIsPinnedOrIdle) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MIMICFS_REQUIRE_IO_URING();
  MountedVolume vol("ext4", {"--io-uring", "on", "--fault", "op=fsync,crash=after"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(vol.stats()["fuse"]["transport"], "io_uring");
  const std::string path = vol.file("f");
  on_cpu(0, [&] {
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
    if (fd < 0) return;
    (void)pwrite(fd, "x", 1, 0);
    (void)fsync(fd);  // the power goes once it is done
    close(fd);
  });
  EXPECT_EQ(vol.stats()["power"]["crashes"], 1);
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  cpu_set_t ours;
  ASSERT_EQ(sched_getaffinity(0, sizeof ours, &ours), 0);
  int ring = 0;
  int others = 0;
  bool invalidator = false;
  for (const auto& [tid, name] : threads_of(daemon)) {
    // A thread a ring thread started would bear its name too.
    if (name.rfind("mimicfs-ring-", 0) == 0) {
      ++ring;
      continue;
    }
    ++others;
    invalidator |= name == "mimicfs-inval";
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(tid, sizeof set, &set), 0) << tid;
    EXPECT_TRUE(CPU_EQUAL(&set, &ours)) << "thread " << tid << " (" << name << ")";
    EXPECT_EQ(sched_getscheduler(tid), SCHED_OTHER) << "thread " << tid << " (" << name << ")";
  }
  // FuseRing::kEntriesPerQueue per queue, no more.
  EXPECT_EQ(ring, vol.stats()["fuse"]["ring_queues"].get<int>() * kEntriesPerQueue);
  EXPECT_TRUE(invalidator);
  EXPECT_GE(others, 4);  // the serving thread, a /dev/fuse worker, the heap trimmer, that one
}

// The daemon's anonymous resident memory, in KiB, counted page by page
// (smaps_rollup walks the page tables; status's RssAnon is a per-CPU
// counter's approximation); -1 if unread.
long anonymous_kib(pid_t daemon) {
  std::ifstream rollup("/proc/" + std::to_string(daemon) + "/smaps_rollup");
  std::string line;
  while (std::getline(rollup, line)) {
    if (line.rfind("Anonymous:", 0) == 0) return std::stol(line.substr(10));
  }
  return -1;
}

// A ring thread that served a 1 MiB write and read keeps the pages the
// kernel copied them into only while requests keep coming: after a second
// without one it gives them back (FuseRing::kIdleBeforeRelease). Zeros are
// written, which the volume does not store, so that the pages measured are
// the entries' alone.
TEST(FuseRing, AnIdleEntryGivesBackItsPayloadPages) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MIMICFS_REQUIRE_IO_URING();
  MountedVolume vol("ideal", {"--io-uring", "on"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(vol.stats()["fuse"]["transport"], "io_uring");
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  for (int cpu = 0; cpu < cpus(); ++cpu) {  // each queue has served small requests
    ASSERT_TRUE(write_and_read_back_on_cpu(vol.file("small" + std::to_string(cpu)), cpu));
  }
  const long before = anonymous_kib(daemon);
  ASSERT_GT(before, 0);
  constexpr size_t kBytes = 1 << 20;
  void* buffer = nullptr;
  ASSERT_EQ(posix_memalign(&buffer, 4096, kBytes), 0);
  std::memset(buffer, 0, kBytes);
  int served = 0;
  for (int cpu = 0; cpu < cpus(); ++cpu) {
    on_cpu(cpu, [&] {
      const int fd = open(vol.file("zeros" + std::to_string(cpu)).c_str(),
                          O_CREAT | O_RDWR | O_DIRECT, 0644);
      if (fd < 0) return;
      if (pwrite(fd, buffer, kBytes, 0) == static_cast<ssize_t>(kBytes) &&
          pread(fd, buffer, kBytes, 0) == static_cast<ssize_t>(kBytes)) {
        ++served;
      }
      close(fd);
    });
  }
  free(buffer);
  ASSERT_EQ(served, cpus());
  // Held at first (measured within the second): at least 3/4 of a 1 MiB
  // payload per CPU.
  const long held = anonymous_kib(daemon);
  EXPECT_GE(held - before, 768L * cpus()) << "before " << before << " KiB";
  // Given back: within half a payload per CPU of where it was (what serving
  // the requests allocated stays, more of it under AddressSanitizer, whose
  // quarantine keeps freed memory).
  long now = held;
  for (int i = 0; i < 50 && now - before > 512; ++i) {
    usleep(100'000);
    now = anonymous_kib(daemon);
  }
  EXPECT_LE(now - before, 512) << "before " << before << " KiB, after the I/O " << held << " KiB";
}

// Without --io-uring (and without MIMICFS_IO_URING, which CI sets for its
// runs) a mount takes the ring where the kernel offers it and serves
// /dev/fuse where it does not.
TEST(FuseRing, TheDefaultIsTheRingWhereTheKernelOffersIt) {
  MIMICFS_REQUIRE_MOUNTABLE();
  // The environment is changed while only this thread runs.
  const char* set = std::getenv("MIMICFS_IO_URING");
  const std::string saved = set != nullptr ? set : "";
  unsetenv("MIMICFS_IO_URING");
  MountedVolume vol("ideal");
  if (set != nullptr) setenv("MIMICFS_IO_URING", saved.c_str(), 1);
  ASSERT_TRUE(vol.mounted()) << vol.error();
  EXPECT_TRUE(write_and_read_back_on_cpu(vol.file("f"), 0));
  const nlohmann::json fuse = vol.stats()["fuse"];
  if (kernel_offers_io_uring()) {
    EXPECT_EQ(fuse["transport"], "io_uring");
    EXPECT_GE(fuse["ring_requests"].get<int>(), 4);
  } else {
    EXPECT_EQ(fuse["transport"], "dev_fuse");
  }
}

// The kernel refuses to register a ring entry only when it runs out of
// memory; a library preloaded into the daemons started while this lives
// makes it refuse the first `count` of queue 0's
// (tests/support/ring_refusal_preload.cc). The environment is changed while
// only this thread runs, and put back as it was.
class RefusedEntries {
 public:
  explicit RefusedEntries(int count) {
    const std::string preload = saved("LD_PRELOAD").value_or("");
    setenv("LD_PRELOAD",
           (std::string(MIMICFS_RING_REFUSAL_PRELOAD) + (preload.empty() ? "" : ":" + preload))
               .c_str(),
           1);
    setenv("MIMICFS_TEST_REFUSE_RING", ("0:" + std::to_string(count)).c_str(), 1);
    // Under AddressSanitizer: its runtime is not the first library loaded.
    setenv("ASAN_OPTIONS", (saved("ASAN_OPTIONS").value_or("") + ":verify_asan_link_order=0").c_str(),
           1);
  }
  ~RefusedEntries() {
    unsetenv("MIMICFS_TEST_REFUSE_RING");
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  RefusedEntries(const RefusedEntries&) = delete;
  RefusedEntries& operator=(const RefusedEntries&) = delete;

 private:
  const std::optional<std::string>& saved(const std::string& name) {
    const char* value = std::getenv(name.c_str());
    return saved_[name] = value != nullptr ? std::optional<std::string>(value) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

// An ideal mount over the ring whose daemon had the kernel refuse `count` of
// queue 0's entries.
std::unique_ptr<MountedVolume> mount_refusing(int count) {
  const RefusedEntries refused(count);
  return std::make_unique<MountedVolume>("ideal", std::vector<std::string>{"--io-uring", "on"});
}

std::string contents_of(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Polls `done` for up to 5 s.
template <typename Done>
bool within_5s(Done&& done) {
  for (int i = 0; i < 50; ++i) {
    if (done()) return true;
    usleep(100'000);
  }
  return done();
}

// How many threads the daemon has named `name`.
int threads_named(pid_t daemon, const std::string& name) {
  const auto names = thread_names(daemon);
  return names.count(name) != 0 ? names.at(name) : 0;
}

// An entry the kernel refuses ends its thread; the queue serves with the
// others, and the mount over the ring.
TEST(FuseRing, AQueueServesWithTheEntriesTheKernelTook) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MIMICFS_REQUIRE_IO_URING();
  const auto mounted = mount_refusing(3);
  MountedVolume& vol = *mounted;
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  // Until every queue has an entry the kernel serves /dev/fuse (it stopped
  // holding requests for the ring at the first refusal).
  EXPECT_TRUE(within_5s(
      [&] { return threads_named(daemon, "mimicfs-ring-0") == kEntriesPerQueue - 3; }))
      << threads_named(daemon, "mimicfs-ring-0") << " threads on queue 0";
  EXPECT_TRUE(within_5s([&] {
    const int before = vol.stats()["fuse"]["ring_requests"].get<int>();
    return write_and_read_back_on_cpu(vol.file("probe"), 0) &&
           vol.stats()["fuse"]["ring_requests"].get<int>() > before;
  }));
  const int before = vol.stats()["fuse"]["ring_requests"].get<int>();
  for (int cpu = 0; cpu < cpus(); ++cpu) {
    EXPECT_TRUE(write_and_read_back_on_cpu(vol.file("f" + std::to_string(cpu)), cpu)) << cpu;
  }
  const nlohmann::json fuse = vol.stats()["fuse"];
  EXPECT_EQ(fuse["transport"], "io_uring");
  EXPECT_GE(fuse["ring_requests"].get<int>() - before, 4 * cpus());
  for (int cpu = 1; cpu < cpus(); ++cpu) {
    EXPECT_EQ(threads_named(daemon, "mimicfs-ring-" + std::to_string(cpu)), kEntriesPerQueue)
        << cpu;
  }
  EXPECT_NE(contents_of(vol.log()).find("queue 0: the kernel refused an entry"), std::string::npos);
}

// With every entry of one queue refused the kernel never turns to the ring:
// the mount goes on over /dev/fuse, stats.json says so, and no ring thread
// stays.
TEST(FuseRing, AQueueWithNoEntryLeavesTheMountOnDevFuse) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MIMICFS_REQUIRE_IO_URING();
  const auto mounted = mount_refusing(kEntriesPerQueue);
  MountedVolume& vol = *mounted;
  ASSERT_TRUE(vol.mounted()) << vol.error();
  for (int cpu = 0; cpu < cpus(); ++cpu) {
    EXPECT_TRUE(write_and_read_back_on_cpu(vol.file("f" + std::to_string(cpu)), cpu)) << cpu;
  }
  // The refusals come as the threads register, right after INIT.
  EXPECT_TRUE(within_5s([&] { return vol.stats()["fuse"]["transport"] == "dev_fuse"; }));
  EXPECT_EQ(vol.stats()["fuse"]["ring_requests"], 0);
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  EXPECT_TRUE(within_5s([&] {
    for (const auto& [name, count] : thread_names(daemon)) {
      if (name.rfind("mimicfs-ring-", 0) == 0) return false;
    }
    return true;
  }));
  EXPECT_NE(contents_of(vol.log()).find("queue 0: the kernel refused every entry"),
            std::string::npos);
}

TEST(FuseRing, OffServesDevFuseAlone) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4", {"--io-uring", "off"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  EXPECT_TRUE(write_and_read_back_on_cpu(vol.file("f"), 0));
  EXPECT_EQ(vol.stats()["fuse"]["transport"], "dev_fuse");
  EXPECT_EQ(vol.stats()["fuse"]["ring_requests"], 0);
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  for (const auto& [name, count] : thread_names(daemon)) {
    EXPECT_EQ(name.find("mimicfs-ring"), std::string::npos) << name;
  }
}

// /dev/fuse's workers (libfuse's loop, fusefs/fuse_session.h): callers at
// once make the daemon start more, never more than FuseSession::kMaxThreads,
// and they stay, ready for the next burst.
TEST(FuseWorkers, CallersAtOnceStartWorkersUpToTheBound) {
  MIMICFS_REQUIRE_MOUNTABLE();
  // Each fsync waits its emulated commit (1.2 ms on nfs): the callers overlap.
  MountedVolume vol("nfs", {"--io-uring", "off", "--latency", "real"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  const int bound = vol.stats()["fuse"]["max_workers"].get<int>();
  EXPECT_EQ(bound, 16);
  std::atomic<bool> stop{false};
  std::vector<std::thread> callers;
  for (int i = 0; i < 2 * bound; ++i) {
    callers.emplace_back([&, i] {
      const int fd = open(vol.file("f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY, 0644);
      while (fd >= 0 && !stop) {
        if (pwrite(fd, "x", 1, 0) != 1 || fsync(fd) != 0) break;
      }
      if (fd >= 0) close(fd);
    });
  }
  int most = 0;
  const bool grew = within_5s([&] {
    most = std::max(most, threads_named(daemon, "mimicfs-worker"));
    return most >= 4;
  });
  for (int i = 0; i < 20; ++i) {
    most = std::max(most, threads_named(daemon, "mimicfs-worker"));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (auto& caller : callers) caller.join();
  EXPECT_TRUE(grew) << most << " workers";
  EXPECT_LE(most, bound);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a heap trimmer's check
  EXPECT_GE(threads_named(daemon, "mimicfs-worker"), 4) << "workers stay";
  EXPECT_LE(vol.stats()["fuse"]["workers"].get<int>(), bound);
}

// The 8 operations a frozen volume holds waiting (docs/time.md), all sent from
// one CPU, must each reach the daemon and must not hold up the restart sent
// next from the same CPU: that CPU's queue has entries to spare for them all
// (the kernel hands a request queued behind busy entries to the next of them
// that commits, not to an entry registered later). Holds over /dev/fuse too.
TEST(FuseRing, OperationsWaitingOnOneCpuDoNotHoldUpTheNextFromIt) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4", {"--io-uring", kernel_offers_io_uring() ? "on" : "off"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const pid_t daemon = daemon_of(vol.path());
  ASSERT_GT(daemon, 0);
  // A file each, open before the cut: writes to different files do not wait
  // for each other in the kernel (creates in one directory would).
  constexpr int kWaiting = 8;
  std::vector<int> fds;
  for (int i = 0; i < kWaiting; ++i) {
    fds.push_back(open(vol.file("f" + std::to_string(i)).c_str(), O_CREAT | O_RDWR, 0644));
    ASSERT_GE(fds.back(), 0);
  }
  ASSERT_EQ(vol.ctl("crash freeze"), 0);
  std::atomic<int> answered{0};
  std::vector<std::thread> waiting;
  for (int i = 0; i < kWaiting; ++i) {
    waiting.emplace_back([&, i] {
      if (!run_on_cpu(0)) return;
      (void)pwrite(fds[i], "x", 1, 0);  // waits, then EIO
      answered.fetch_add(1);
    });
  }
  // Watched from the last CPU, so that the watch is not what waits.
  const int watcher = cpus() - 1;
  int frozen = 0;
  on_cpu(watcher, [&] {
    for (int i = 0; i < 400 && frozen < kWaiting; ++i) {
      frozen = vol.stats()["power"].value("frozen_operations", 0);
      usleep(10'000);
    }
  });
  EXPECT_EQ(frozen, kWaiting);
  EXPECT_EQ(answered.load(), 0) << "they wait";
  std::atomic<int> restarted{-1};
  std::thread restart([&] {
    if (run_on_cpu(0)) restarted = vol.ctl("restart");
  });
  for (int i = 0; i < 1000 && restarted == -1; ++i) usleep(10'000);
  if (restarted == -1) {
    // Held up behind the waiting writes: end the daemon, which answers them all.
    ADD_FAILURE() << "the restart from CPU 0 is not served within 10 s";
    kill(daemon, SIGKILL);
  }
  restart.join();
  EXPECT_EQ(restarted, 0);
  for (auto& thread : waiting) thread.join();
  EXPECT_EQ(answered.load(), kWaiting);
  for (const int fd : fds) close(fd);
}

}  // namespace
}  // namespace mimicfs::testing
