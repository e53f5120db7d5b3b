// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/cost_layer.h"

#include <gtest/gtest.h>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

// Below the cost layer: replaces whatever the volume reported with `script`.
class ScriptedWork final : public Layer {
 public:
  explicit ScriptedWork(FileSystem& target) : Layer(target) {}
  Work script;

 protected:
  void leave(const Call&, Work& work, int) override {
    const auto destroyed = work.destroyed_inodes;
    work = script;
    work.destroyed_inodes = destroyed;
  }
};

struct Stack {
  explicit Stack(std::string_view profile)
      : volume(builtin(profile), std::make_unique<MemoryDataStore>(), clock),
        scripted(volume),
        cost(scripted, LatencyMode{}) {}
  FixedWallClock clock;
  Volume volume;
  ScriptedWork scripted;
  CostLayer cost;
};

TEST(CostLayer, PricesTheReportedWorkWithTheCostModel) {
  Stack s("nfs");
  const CostModel model(s.volume.profile());
  s.scripted.script.metadata_updates = 2;
  s.scripted.script.commits = 1;
  s.scripted.script.device_writes = {3, 3 << 20, 1, 4};
  Work work;
  ASSERT_TRUE(s.cost.mkdir(kRoot, "d", 0755, Owner{}, work).has_value());
  Cost expected = model.metadata();
  expected += model.metadata();
  expected += model.commit();
  expected += model.device_writes({3, 3 << 20, 1, 4});
  EXPECT_GT(expected.total(), 0u);
  EXPECT_EQ(work.emulated_ns, expected.total());
  EXPECT_EQ(s.cost.emulated_ns(), expected.total());
}

TEST(CostLayer, AFailedOperationCostsOnlyAFaultsLatency) {
  Stack s("nfs");
  s.scripted.script.metadata_updates = 1;
  s.scripted.script.fault_latency_ns = 250;
  Work work;
  EXPECT_FALSE(s.cost.rmdir(kRoot, "missing", work).has_value());
  EXPECT_EQ(work.emulated_ns, 250u);
  EXPECT_EQ(s.cost.emulated_ns(), 250u);
}

TEST(CostLayer, ChargesTheFileTheWorkWasForUntilItIsDestroyed) {
  Stack s("nfs");
  FileSystem& fs = s.cost;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  s.scripted.script.file = f;
  s.scripted.script.commits = 1;
  ASSERT_TRUE(fs.fsync(f, false).has_value());
  const uint64_t commit = CostModel(s.volume.profile()).commit().total();
  EXPECT_EQ(fs.file_stats(f)->emulated_ns, commit);
  EXPECT_EQ(fs.snapshot().files.at("/f").emulated_ns, commit);
  EXPECT_EQ(fs.snapshot().clock.emulated_ns, commit);

  s.scripted.script = {};
  ASSERT_TRUE(fs.unlink(kRoot, "f").has_value());
  fs.forget(f, 1);  // the last reference: the inode is gone, and its time with it
  ASSERT_TRUE(fs.create(kRoot, "g", S_IFREG | 0644, 0, Owner{}).has_value());
  EXPECT_EQ(fs.snapshot().files.at("/g").emulated_ns, 0u);
  EXPECT_EQ(fs.snapshot().clock.emulated_ns, commit);  // the total keeps it
}

TEST(CostLayer, AnUnlinkThatDestroysTheFileLeavesNoEntryBehind) {
  Stack s("nfs");
  FileSystem& fs = s.cost;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  fs.forget(f, 1);  // no reference left: the unlink destroys it
  s.scripted.script.file = f;
  s.scripted.script.unlinks = 1;
  ASSERT_TRUE(fs.unlink(kRoot, "f").has_value());
  EXPECT_GT(s.cost.emulated_ns(), 0u);
  EXPECT_EQ(s.cost.tracked_files(), 0u);
}

TEST(CostLayer, AFailedOperationChargesNoFile) {
  Stack s("nfs");
  FileSystem& fs = s.cost;
  ASSERT_TRUE(fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{}).has_value());
  s.scripted.script = {};
  s.scripted.script.file = 999;
  s.scripted.script.fault_latency_ns = 100;
  EXPECT_FALSE(fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{}).has_value());  // EEXIST
  EXPECT_EQ(s.cost.emulated_ns(), 100u);
  EXPECT_EQ(s.cost.tracked_files(), 0u);
}

TEST(CostLayer, ResetZeroesTheClockAndEveryFile) {
  Stack s("nfs");
  FileSystem& fs = s.cost;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  s.scripted.script.file = f;
  s.scripted.script.opens = 1;
  ASSERT_TRUE(fs.open(f, O_RDONLY).has_value());
  EXPECT_GT(s.cost.emulated_ns(), 0u);
  fs.reset_statistics();
  EXPECT_EQ(s.cost.emulated_ns(), 0u);
  EXPECT_EQ(fs.file_stats(f)->emulated_ns, 0u);
}

TEST(CostLayer, SnapshotNamesTheLatencyMode) {
  Stack s("ideal");
  s.cost.set_latency(*LatencyMode::parse("real:0.5"));
  EXPECT_EQ(s.cost.snapshot().clock.mode, "real:0.5");
}

}  // namespace
}  // namespace mimicfs
