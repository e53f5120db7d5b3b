// SPDX-License-Identifier: Apache-2.0
// Many threads on one Engine at once: namespace changes, buffered, O_DSYNC and
// direct writes, punches, truncates, fsyncs, crashes, snapshots and fault rules,
// on four profiles. Run under ThreadSanitizer by scripts/sanitize.sh; here it
// checks that nothing fails unexpectedly and that every block comes back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

// Errors the operations may meet legitimately when other threads race them.
bool expected_error(Errno e) {
  switch (e.value) {
    case ENOENT:
    case EEXIST:
    case ENOTEMPTY:
    case EIO:  // the fault rule
    case ENOSPC:
    case EINVAL:      // unaligned direct I/O
    case EOPNOTSUPP:  // nfs has no fallocate
      return true;
    default:
      return false;
  }
}

void hammer(Fs& fs, int thread, int operations, std::atomic<int>& unexpected,
            std::atomic<int>& succeeded) {
  std::mt19937_64 random(0x5eed + thread);
  auto pick = [&](int n) { return static_cast<int>(random() % n); };
  const std::string data = pattern(64 * 1024, static_cast<char>(thread));
  auto check = [&](const auto& result) {
    if (result) {
      ++succeeded;
    } else if (!expected_error(result.error())) {
      ++unexpected;
    }
  };
  for (int i = 0; i < operations; ++i) {
    const std::string name = fmt::format("f{}", pick(8));
    const std::string other = fmt::format("f{}", pick(8));
    auto found = fs.volume.lookup(kRoot, name);
    const uint64_t inode = found ? found->inode : 0;
    switch (pick(14)) {
      case 0:
        if (auto created = fs.volume.create(kRoot, name, S_IFREG | 0644, 0, Owner{})) {
          ++succeeded;
          fs.volume.forget(created->inode, 1);  // as the kernel does with its reference
        } else {
          check(created);
        }
        break;
      case 1:
      case 2:
      case 3:
        if (inode) {
          const int flags = pick(4) == 0 ? O_DSYNC : pick(4) == 0 ? O_DIRECT : 0;
          const uint64_t offset = pick(64) * 4096 + (flags & O_DIRECT ? 0 : pick(100));
          check(fs.volume.write(inode, offset, as_bytes(data).first(1 + pick(data.size() - 1)),
                                flags));
        }
        break;
      case 4:
        if (inode) check(fs.volume.fallocate(inode, kPunch, pick(64) * 4096, 1 + pick(65536)));
        break;
      case 5:
        if (inode) {
          AttributeChanges changes;
          changes.size = pick(256 * 1024);
          check(fs.volume.setattr(inode, changes));
        }
        break;
      case 6:
        if (inode) check(fs.volume.fsync(inode, pick(2) == 0));
        break;
      case 7:
        check(fs.volume.rename(kRoot, name, kRoot, other, 0));
        break;
      case 8:
        if (auto linked = inode ? fs.volume.link(inode, kRoot, other) : fail(ENOENT)) {
          ++succeeded;
          fs.volume.forget(linked->inode, 1);
        } else {
          check(linked);
        }
        break;
      case 9:
        check(fs.volume.unlink(kRoot, name));
        break;
      case 10:
        if (inode && fs.volume.open(inode, O_RDWR)) {
          std::vector<std::byte> out(8192);
          check(fs.volume.read(inode, pick(128 * 1024), out));
          check(fs.volume.flush(inode, true));
          fs.volume.release(inode);
        }
        break;
      case 11:
        (void)fs.volume.snapshot();
        (void)fs.volume.layout();
        break;
      case 12:
        if (pick(50) == 0) fs.volume.crash();
        break;
      case 13:
        if (pick(20) == 0) {
          (void)fs.engine.faults().add(
              fmt::format("op=write,error=EIO,probability=0.1,seed={},count=3", i));
        } else if (pick(20) == 0) {
          fs.engine.faults().clear();
        }
        break;
    }
    if (found) fs.volume.forget(inode, 1);
  }
}

class EngineStress : public testing::TestWithParam<std::string> {};

TEST_P(EngineStress, ConcurrentOperationsKeepTheVolumeConsistent) {
  // "xfs" reclaims in the background: its tasks complete on other threads'
  // operations; "xfs_freeing_at_unlink" frees in the unlink.
  const bool at_unlink = GetParam().ends_with("_freeing_at_unlink");
  Fs fs(at_unlink ? with("xfs", {"allocation.background_reclaim=false"}) : builtin(GetParam()));
  // Crashes and fault firings log a warning each: thousands here.
  const auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::err);
  constexpr int kThreads = 4;
  constexpr int kOperations = 6000;
  std::atomic<int> unexpected{0};
  std::atomic<int> succeeded{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { hammer(fs, t, kOperations, unexpected, succeeded); });
  }
  for (auto& t : threads) t.join();
  spdlog::set_level(level);
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(succeeded.load(), kThreads * kOperations / 4) << "the threads did real work";

  // Every name goes: with no reference left, every block comes back.
  fs.engine.faults().clear();
  const auto entries = fs.volume.read_directory(kRoot);
  ASSERT_TRUE(entries.has_value());
  for (const DirectoryEntry& e : *entries) {
    if (e.name != "." && e.name != "..") {
      ASSERT_TRUE(fs.volume.unlink(kRoot, e.name));
    }
  }
  fs.volume.complete_all_deferred();
  EXPECT_EQ(fs.volume.snapshot().deferred.pending_tasks, 0u);
  EXPECT_EQ(fs.used_bytes(), 0u);
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
  EXPECT_TRUE(fs.volume.snapshot().files.empty());
}

INSTANTIATE_TEST_SUITE_P(Profiles, EngineStress,
                         testing::Values("ext4", "xfs", "btrfs", "nfs", "xfs_freeing_at_unlink"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mimicfs
