// SPDX-License-Identifier: Apache-2.0
// scripts/scenarios.sh's driver: its table of seed 000's extension strategies
// shows what the issue asks it to show, and bad input is a usage error.
#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

const nlohmann::json* row(const nlohmann::json& scenario, const std::string& strategy,
                          const std::string& profile) {
  for (const auto& r : scenario["rows"]) {
    if (r["strategy"] == strategy && r["profile"] == profile) return &r;
  }
  return nullptr;
}

// posix_fallocate on nfs: refused once, then glibc's one byte per 4 KiB (16384
// writes for 64 MiB) and a file fragmented into an extent per 2 KiB once its
// pages are written; the same call on nfs42 is one real fallocate; the fixed
// strategy (fallocate, then 1 MiB zeros) is refused once and stays one extent.
TEST(ScenarioDriver, ExtendTableShowsTheSeed000Pattern) {
  MIMICFS_REQUIRE_MOUNTABLE();
  auto r = run_command(
      {MIMICFS_SCENARIOS_BINARY, "--scenario", "extend", "--profiles", "nfs,nfs42", "--json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["scenarios"].size(), 1u);
  const auto& extend = doc["scenarios"][0];
  EXPECT_EQ(extend["name"], "extend");
  ASSERT_EQ(extend["rows"].size(), 8u);

  const auto* glibc = row(extend, "posix_fallocate", "nfs");
  ASSERT_NE(glibc, nullptr);
  EXPECT_EQ((*glibc)["fallocate_refused"], 1);
  EXPECT_EQ((*glibc)["writes"], 16384 + 4096) << "the fallback's bytes, then the pages";
  EXPECT_GE((*glibc)["extents"].get<uint64_t>(), 16384u);

  const auto* fixed = row(extend, "fallocate_or_zeros", "nfs");
  ASSERT_NE(fixed, nullptr);
  EXPECT_EQ((*fixed)["fallocate_refused"], 1);
  EXPECT_EQ((*fixed)["writes"], 64 + 4096);
  EXPECT_EQ((*fixed)["extents"], 1);

  const auto* nfs42 = row(extend, "posix_fallocate", "nfs42");
  ASSERT_NE(nfs42, nullptr);
  EXPECT_EQ((*nfs42)["fallocate_refused"], 0);
  EXPECT_EQ((*nfs42)["writes"], 4096);
  EXPECT_EQ((*nfs42)["extents"], 1);
  for (const auto& each : extend["rows"]) EXPECT_EQ(each["allocated_bytes"], 64 << 20);
}

// A database dropped while another process holds a table open: on nfs the
// drop's rmdir fails (ENOTEMPTY) on the silly-renamed table, whose .nfs name
// cannot be removed (EBUSY) and keeps its 4 MiB until the holder closes it;
// on ext4 the drop succeeds and the open table keeps its space with no name.
TEST(ScenarioDriver, DropWhileOpenShowsTheSillyRename) {
  MIMICFS_REQUIRE_MOUNTABLE();
  auto r = run_command({MIMICFS_SCENARIOS_BINARY, "--scenario", "drop", "--json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["scenarios"].size(), 1u);
  const auto& drop = doc["scenarios"][0];
  const auto* nfs = row(drop, "drop_while_open", "nfs");
  ASSERT_NE(nfs, nullptr);
  EXPECT_EQ((*nfs)["notes"]["rmdir"], "ENOTEMPTY");
  EXPECT_EQ((*nfs)["notes"]["left"], 1);
  EXPECT_EQ((*nfs)["notes"]["unlink_left"], "EBUSY");
  EXPECT_EQ((*nfs)["notes"]["kept_mib"], "4.0");
  EXPECT_EQ((*nfs)["notes"]["rmdir_after_close"], "ok");
  const auto* ext4 = row(drop, "drop_while_open", "ext4");
  ASSERT_NE(ext4, nullptr);
  EXPECT_EQ((*ext4)["notes"]["rmdir"], "ok");
  EXPECT_EQ((*ext4)["notes"]["kept_mib"], "4.0");
  for (const char* profile : {"nfs", "ext4"}) {
    const auto* closed = row(drop, "drop_after_close", profile);
    ASSERT_NE(closed, nullptr);
    EXPECT_EQ((*closed)["notes"]["rmdir"], "ok") << profile;
    EXPECT_EQ((*closed)["notes"]["kept_mib"], "0.0") << profile;
  }
}

// Two clients of one server: B's cached size and page stay until its
// attribute cache expires or B opens the file again (close-to-open); B's
// descriptor of a file A removed is stale.
TEST(ScenarioDriver, TwoClientsShowCloseToOpenAndStaleHandles) {
  MIMICFS_REQUIRE_MOUNTABLE();
  auto r = run_command({MIMICFS_SCENARIOS_BINARY, "--scenario", "clients", "--profiles", "nfs",
                        "--json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out);
  const auto* reader = row(doc["scenarios"][0], "reader_on_another_client", "nfs");
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ((*reader)["notes"]["page_at_once"], "o") << "B's page cache";
  EXPECT_EQ((*reader)["notes"]["size_at_once"], "1") << "B's attribute cache";
  EXPECT_EQ((*reader)["notes"]["size_later"], "2") << "past acregmin";
  EXPECT_EQ((*reader)["notes"]["page_later"], "n") << "the revalidation dropped the pages";
  EXPECT_EQ((*reader)["notes"]["size_reopened"], "2");
  EXPECT_EQ((*reader)["notes"]["page_reopened"], "n");

  r = run_command({MIMICFS_SCENARIOS_BINARY, "--scenario", "stale", "--profiles", "nfs", "--json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  doc = nlohmann::json::parse(r.out);
  const auto* removed = row(doc["scenarios"][0], "removed_by_another_client", "nfs");
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ((*removed)["notes"]["names_left"], 0) << "no silly rename on A";
  EXPECT_EQ((*removed)["notes"]["read"], "ESTALE");
  EXPECT_EQ((*removed)["notes"]["write"], "ok") << "into B's page cache";
  EXPECT_EQ((*removed)["notes"]["close"], "ESTALE");
}

// fio, real software: --fallocate=posix on nfs is the pattern from before
// MDEV-32268's fix (refused, then glibc's byte per 4 KiB: an extent per 2 KiB once
// written); native is refused and fio writes its blocks alone (one extent); on
// nfs42 posix is one real fallocate.
TEST(ScenarioDriver, FioFallocateModes) {
  MIMICFS_REQUIRE_MOUNTABLE();
  if (run_command({"fio", "--version"}).exit_status != 0) {
    if (fuse_required()) FAIL() << "fio is missing: scripts/bootstrap.sh installs it";
    GTEST_SKIP() << "fio is not installed";
  }
  auto r = run_command(
      {MIMICFS_SCENARIOS_BINARY, "--scenario", "fio", "--profiles", "nfs,nfs42", "--json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const auto& fio = doc["scenarios"][0];
  constexpr uint64_t kSteps = (16 << 20) / 4096;
  constexpr uint64_t kBlocks = (16 << 20) / (16 << 10);

  const auto* posix = row(fio, "fio_fallocate_posix", "nfs");
  ASSERT_NE(posix, nullptr);
  EXPECT_EQ((*posix)["fallocate_refused"], 1);
  EXPECT_EQ((*posix)["writes"], kSteps + kBlocks);
  EXPECT_GE((*posix)["extents"].get<uint64_t>(), 2 * kSteps);

  const auto* native = row(fio, "fio_fallocate_native", "nfs");
  ASSERT_NE(native, nullptr);
  EXPECT_EQ((*native)["fallocate_refused"], 1);
  EXPECT_EQ((*native)["writes"], kBlocks);
  EXPECT_EQ((*native)["extents"], 1);

  const auto* nfs42 = row(fio, "fio_fallocate_posix", "nfs42");
  ASSERT_NE(nfs42, nullptr);
  EXPECT_EQ((*nfs42)["fallocate_refused"], 0);
  EXPECT_EQ((*nfs42)["writes"], kBlocks);
  EXPECT_EQ((*nfs42)["extents"], 1);
}

TEST(ScenarioDriver, BadInputIsAUsageError) {
  MIMICFS_REQUIRE_MOUNTABLE();
  auto unknown = run_command({MIMICFS_SCENARIOS_BINARY, "--scenario", "nosuch"});
  EXPECT_EQ(unknown.exit_status, 2);
  EXPECT_NE(unknown.err.find("unknown scenario \"nosuch\""), std::string::npos) << unknown.err;
  auto profile = run_command({MIMICFS_SCENARIOS_BINARY, "--scenario", "grow", "--profiles", "zfs"});
  EXPECT_EQ(profile.exit_status, 2);
  EXPECT_NE(profile.err.find("unknown profile \"zfs\""), std::string::npos) << profile.err;
}

}  // namespace
}  // namespace mimicfs::testing
