// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/fault_layer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "engine/fs/caller.h"
#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

using Stack = LayerOverVolume<FaultLayer>;

TEST(FaultLayer, AnErrorRuleFailsTheOperationBeforeTheVolumeSeesIt) {
  Stack s("ext4");
  ASSERT_TRUE(s.layer.rules().add("op=create,path=/db/*.ibd,error=EDQUOT").has_value());
  FileSystem& fs = s.layer;
  const uint64_t db = fs.mkdir(kRoot, "db", 0755, Owner{})->inode;
  EXPECT_EQ(error_of(fs.create(db, "t.ibd", S_IFREG | 0644, 0, Owner{})), Errno{EDQUOT});
  EXPECT_EQ(error_of(s.volume.lookup(db, "t.ibd")), Errno{ENOENT});
  EXPECT_TRUE(fs.create(db, "t.frm", S_IFREG | 0644, 0, Owner{}).has_value());
}

TEST(FaultLayer, MatchesTheFilesPathFromTheRoot) {
  Stack s("ext4");
  ASSERT_TRUE(s.layer.rules().add("op=write,path=/d/a*,error=EIO").has_value());
  FileSystem& fs = s.layer;
  const uint64_t d = fs.mkdir(kRoot, "d", 0755, Owner{})->inode;
  const uint64_t a = fs.create(d, "a1", S_IFREG | 0644, 0, Owner{})->inode;
  const uint64_t b = fs.create(d, "b1", S_IFREG | 0644, 0, Owner{})->inode;
  EXPECT_EQ(error_of(fs.write(a, 0, as_bytes("x"))), Errno{EIO});
  EXPECT_TRUE(fs.write(b, 0, as_bytes("x")).has_value());
  EXPECT_EQ(s.volume.getattr(a)->size, 0u);
}

TEST(FaultLayer, ALatencyRuleAddsToTheWorkAndLetsTheOperationRun) {
  Stack s("ext4");
  ASSERT_TRUE(s.layer.rules().add("op=fsync,latency=7ms").has_value());
  FileSystem& fs = s.layer;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  Work work;
  EXPECT_TRUE(fs.fsync(f, false, work).has_value());
  EXPECT_EQ(work.fault_latency_ns, 7'000'000u);
}

// A crash rule calls the hook: before the operation (which gets EIO and never
// runs) or after it (which completes first).
TEST(FaultLayer, ACrashRuleCutsThePowerBeforeOrAfterTheOperation) {
  Stack s("ext4");
  std::vector<std::string> causes;
  s.layer.set_crash_hook([&](const PowerCut& cut) {
    EXPECT_FALSE(cut.hold);
    causes.push_back(cut.cause);
    s.volume.crash();
  });
  ASSERT_TRUE(s.layer.rules().add("op=create,path=/lost,crash=before").has_value());
  ASSERT_TRUE(s.layer.rules().add("op=fsync,crash=after").has_value());
  FileSystem& fs = s.layer;
  EXPECT_EQ(error_of(fs.create(kRoot, "lost", S_IFREG | 0644, 0, Owner{})), Errno{EIO});
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_NE(causes[0].find("create /lost"), std::string::npos) << causes[0];
  EXPECT_EQ(error_of(s.volume.lookup(kRoot, "lost")), Errno{ENOENT}) << "it never ran";

  const uint64_t f = fs.create(kRoot, "kept", S_IFREG | 0644, 0, Owner{})->inode;
  ASSERT_TRUE(fs.write(f, 0, as_bytes("durable")).has_value());
  EXPECT_TRUE(fs.fsync(f, false).has_value()) << "it completes, then the power goes";
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_NE(causes[1].find("(after it)"), std::string::npos) << causes[1];
  EXPECT_EQ(s.volume.getattr(f)->size, 7u) << "what the fsync made durable survives";
}

TEST(FaultLayer, AVolumeHeldOffAnswersEio) {
  Stack s("ext4");
  FileSystem& fs = s.layer;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  s.layer.power_off(false);
  EXPECT_EQ(error_of(fs.write(f, 0, as_bytes("x"))), Errno{EIO});
  EXPECT_EQ(error_of(fs.lookup(kRoot, "f")), Errno{EIO});
  EXPECT_TRUE(fs.getattr(f).has_value());
  EXPECT_TRUE(fs.statfs().has_value());
  s.layer.power_on();
  EXPECT_TRUE(fs.write(f, 0, as_bytes("x")).has_value());
}

// A frozen volume: an operation waits for the restart and then gets EIO; a
// close's flush and the operations past the waiters' limit get EIO at once.
TEST(FaultLayer, AFrozenVolumeMakesOperationsWaitForTheRestart) {
  Stack s("ext4");
  FileSystem& fs = s.layer;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  s.layer.power_off(true);
  std::vector<std::future<Result<size_t>>> writers;
  for (int i = 0; i < FaultLayer::kMaxFrozenOperations; ++i) {
    writers.push_back(
        std::async(std::launch::async, [&] { return fs.write(f, 0, as_bytes("x")); }));
  }
  for (int waited = 0; waited < 2000; ++waited) {  // until all of them wait
    if (s.layer.snapshot().power.value("frozen_operations", 0) == FaultLayer::kMaxFrozenOperations)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(s.layer.snapshot().power.value("frozen_operations", 0),
            FaultLayer::kMaxFrozenOperations);
  for (auto& writer : writers) {
    EXPECT_EQ(writer.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  }
  EXPECT_EQ(error_of(fs.write(f, 0, as_bytes("x"))), Errno{EIO}) << "past the limit: at once";
  EXPECT_EQ(error_of(fs.flush(f, true)), Errno{EIO}) << "a close never waits";
  EXPECT_TRUE(fs.getattr(f).has_value());
  s.layer.power_on();
  for (auto& writer : writers) EXPECT_EQ(error_of(writer.get()), Errno{EIO});
  EXPECT_FALSE(s.layer.snapshot().power.contains("frozen_operations"));
  EXPECT_TRUE(fs.write(f, 0, as_bytes("x")).has_value());

  // A waiter leaves at the restart even when a new freeze follows before it wakes.
  s.layer.power_off(true);
  auto late = std::async(std::launch::async, [&] { return fs.write(f, 0, as_bytes("x")); });
  while (s.layer.snapshot().power.value("frozen_operations", 0) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  s.layer.power_on();
  s.layer.power_off(true);
  ASSERT_EQ(late.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(error_of(late.get()), Errno{EIO});
  s.layer.power_off(false);
  EXPECT_TRUE(s.layer.frozen()) << "a hold after a freeze keeps it frozen";
  s.layer.power_on();
}

// A caller that is killed while it waits (Credentials::dying) stops waiting:
// its operation gets EIO without a restart, and the others wait on.
TEST(FaultLayer, AFrozenOperationOfADyingCallerStopsWaiting) {
  struct Caller : Credentials {
    uint32_t uid() const override { return 0; }
    bool in_group(uint32_t) const override { return true; }
    bool has_fsetid() const override { return true; }
    bool has_sys_admin() const override { return true; }
    bool dying() const override { return killed.load(); }
    std::atomic<bool> killed{false};
  };
  Stack s("ext4");
  FileSystem& fs = s.layer;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  s.layer.power_off(true);
  Caller doomed, other;
  auto write_as = [&](Caller& caller, uint32_t id) {
    return std::async(std::launch::async, [&, id] {
      CallerScope scope(id, &caller);
      return fs.write(f, 0, as_bytes("x"));
    });
  };
  auto doomed_write = write_as(doomed, 1);
  auto other_write = write_as(other, 2);
  for (int waited = 0; waited < 2000; ++waited) {
    if (s.layer.snapshot().power.value("frozen_operations", 0) == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(s.layer.snapshot().power.value("frozen_operations", 0), 2);
  doomed.killed = true;
  ASSERT_EQ(doomed_write.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(error_of(doomed_write.get()), Errno{EIO});
  EXPECT_EQ(other_write.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(s.layer.snapshot().power.value("frozen_operations", 0), 1);
  s.layer.power_on();
  EXPECT_EQ(error_of(other_write.get()), Errno{EIO});
}

TEST(FaultLayer, CacheDrivenOperationsAreNeverFaulted) {
  Stack s("ext4");
  ASSERT_TRUE(s.layer.rules().add("error=EIO").has_value());  // every operation
  FileSystem& fs = s.layer;
  EXPECT_TRUE(fs.getattr(kRoot).has_value());
  EXPECT_TRUE(fs.read_directory(kRoot).has_value());
  EXPECT_TRUE(fs.statfs().has_value());
  EXPECT_EQ(error_of(fs.lookup(kRoot, "nothing")), Errno{ENOENT});  // the volume's answer
  EXPECT_EQ(error_of(fs.mkdir(kRoot, "d", 0755, Owner{})), Errno{EIO});
  EXPECT_FALSE(FaultLayer::faultable(Op::kGetxattr));
  EXPECT_TRUE(FaultLayer::faultable(Op::kPunch));
}

TEST(FaultLayer, SnapshotShowsTheRulesAndTheirCounts) {
  Stack s("ideal");
  ASSERT_TRUE(s.layer.rules().add("op=mkdir,error=ENOSPC,nth=2").has_value());
  FileSystem& fs = s.layer;
  EXPECT_TRUE(fs.mkdir(kRoot, "a", 0755, Owner{}).has_value());
  EXPECT_EQ(error_of(fs.mkdir(kRoot, "b", 0755, Owner{})), Errno{ENOSPC});
  const nlohmann::json faults = fs.snapshot().faults;
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0]["matched"], 2);
  EXPECT_EQ(faults[0]["fired"], 1);
}

}  // namespace
}  // namespace mimicfs
