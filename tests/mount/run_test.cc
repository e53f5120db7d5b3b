// SPDX-License-Identifier: Apache-2.0
// `mimicfs run`: the command runs on a temporary mount named by MIMICFS_MOUNT,
// the run ends with the command's status, writes the final stats, and never
// leaves a mount or a directory behind, whatever the command did.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

// Mounts and directories `mimicfs run` made under `tmpdir` and left; empty
// when it cleaned up.
std::string leftovers_under(const std::string& tmpdir) {
  const std::string prefix = tmpdir + "/mimicfs-run.";
  std::string found;
  std::ifstream mounts("/proc/mounts");
  for (std::string line; std::getline(mounts, line);) {
    if (line.find(prefix) != std::string::npos) found += "mounted: " + line + "\n";
  }
  for (const auto& entry : std::filesystem::directory_iterator(tmpdir)) {
    if (entry.path().filename().string().starts_with("mimicfs-run.")) {
      found += "left: " + entry.path().string() + "\n";
    }
  }
  return found;
}

// Each test's runs make their mounts under a TMPDIR of its own, so that the
// check for leftovers sees only this test's (another suite may be running
// `mimicfs run` on the machine at the same time).
class Run : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fuse_unusable_reason().empty()) {
      if (fuse_required()) FAIL() << fuse_unusable_reason();
      GTEST_SKIP() << fuse_unusable_reason();
    }
    if (const char* old = std::getenv("TMPDIR")) old_tmpdir_ = old;
    tmpdir_ = make_temp_dir();
    ASSERT_EQ(setenv("TMPDIR", tmpdir_.c_str(), 1), 0);
  }
  void TearDown() override {
    if (tmpdir_.empty()) return;
    EXPECT_EQ(leftovers(), "");
    if (old_tmpdir_) {
      setenv("TMPDIR", old_tmpdir_->c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
    std::error_code ignored;
    std::filesystem::remove_all(tmpdir_, ignored);
  }
  std::string leftovers() const { return leftovers_under(tmpdir_); }

  std::string tmpdir_;
  std::optional<std::string> old_tmpdir_;
};

TEST_F(Run, ExitsWithTheCommandsStatusAndWritesTheStats) {
  const std::string stats_file = make_temp_dir() + "/stats.json";
  auto r = run_command({mimicfs_binary(), "run", "--profile", "ext4", "--set",
                        "allocation.writeback_bytes=0", "--stats-out", stats_file, "--", "sh", "-c",
                        "test -d \"$MIMICFS_MOUNT\" && "
                        "test \"${MIMICFS_MOUNT#$TMPDIR/mimicfs-run.}\" != \"$MIMICFS_MOUNT\" && "
                        "dd if=/dev/zero of=\"$MIMICFS_MOUNT/t1.ibd\" bs=64k count=16 "
                        "status=none && exit 3"});
  EXPECT_EQ(r.exit_status, 3) << r.err;
  std::ifstream in(stats_file);
  ASSERT_TRUE(in) << "no stats written";
  const nlohmann::json stats = nlohmann::json::parse(in);
  EXPECT_EQ(stats["profile"], "ext4");
  EXPECT_EQ(stats["files"]["/t1.ibd"]["size"], 1 << 20);
  EXPECT_EQ(stats["files"]["/t1.ibd"]["extents"], 1) << "closed: allocated as one extent";
  std::filesystem::remove_all(std::filesystem::path(stats_file).parent_path());
}

// `run` takes the daemon's options as `mount` does, and keeps the log asked for.
TEST_F(Run, TakesTheDaemonsOptions) {
  const std::string dir = make_temp_dir();
  const std::string log = dir + "/mount.log", stats_file = dir + "/stats.json";
  auto r = run_command({mimicfs_binary(), "run", "--io-uring", "off", "--attr-timeout", "0",
                        "--log-level", "info", "--log-file", log, "--stats-out", stats_file,
                        "--", "true"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  std::ifstream in(stats_file);
  ASSERT_TRUE(in) << "no stats written";
  EXPECT_EQ(nlohmann::json::parse(in)["fuse"]["transport"], "dev_fuse");
  std::ifstream log_in(log);
  const std::string logged((std::istreambuf_iterator<char>(log_in)), {});
  EXPECT_NE(logged.find("mounted on"), std::string::npos) << logged;
  auto bad = run_command({mimicfs_binary(), "run", "--attr-timeout", "-1", "--", "true"});
  EXPECT_EQ(bad.exit_status, 2);
  EXPECT_NE(bad.err.find("--attr-timeout"), std::string::npos) << bad.err;
  std::filesystem::remove_all(dir);
}

TEST_F(Run, SuccessIsZero) {
  auto r = run_command({mimicfs_binary(), "run", "--", "true"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

// A command killed by a signal: 128+N, as a shell reports it, and the mount is gone.
TEST_F(Run, CommandKilledBySignal) {
  auto r = run_command({mimicfs_binary(), "run", "--", "sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.exit_status, 128 + SIGKILL) << r.err;
}

TEST_F(Run, CommandThatCannotStartIs127) {
  auto r = run_command({mimicfs_binary(), "run", "--", "/nonexistent/command"});
  EXPECT_EQ(r.exit_status, 127);
  EXPECT_NE(r.err.find("cannot run /nonexistent/command"), std::string::npos) << r.err;
}

// Bad set-up is a usage error with one line, and nothing is mounted.
TEST_F(Run, SetupFailureIsAUsageError) {
  auto unknown = run_command({mimicfs_binary(), "run", "--profile", "zfs", "--", "true"});
  EXPECT_EQ(unknown.exit_status, 2);
  EXPECT_NE(unknown.err.find("unknown profile \"zfs\""), std::string::npos) << unknown.err;
  auto bad_set =
      run_command({mimicfs_binary(), "run", "--set", "device.capacity_bytes=7", "--", "true"});
  EXPECT_EQ(bad_set.exit_status, 2);
  EXPECT_NE(bad_set.err.find("--set device.capacity_bytes"), std::string::npos) << bad_set.err;
  auto no_command = run_command({mimicfs_binary(), "run"});
  EXPECT_EQ(no_command.exit_status, 2);
}

// SIGTERM to the run goes to the command; the run still unmounts and reports
// the command's end.
TEST_F(Run, SigtermIsPassedOnAndTheMountRemoved) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string binary = mimicfs_binary();
    execl(binary.c_str(), binary.c_str(), "run", "--", "sleep", "30", nullptr);
    _exit(127);
  }
  // Wait until the command runs on its mount.
  for (int i = 0; i < 100 && leftovers().find("mounted") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
}

// `mimicfs crashtest`: a file written without fsync is lost at some point and
// the check says so (exit 1); with fsync every point passes (exit 0). Only
// what a workload acknowledged (MIMICFS_CRASHTEST_DIR) must survive.
TEST_F(Run, CrashtestFindsAnUnsyncedFileAndPassesASyncedOne) {
  const std::string check =
      "! test -s \"$MIMICFS_CRASHTEST_DIR/acked\" || grep -q data \"$MIMICFS_MOUNT/f\"";
  const CommandResult broken = run_command(
      {mimicfs_binary(), "crashtest", "--profile", "ext4", "--points", "6", "--workload",
       "echo data > \"$MIMICFS_MOUNT/f\" && echo 1 >> \"$MIMICFS_CRASHTEST_DIR/acked\"", "--check",
       check});
  EXPECT_EQ(broken.exit_status, 1) << broken.out << broken.err;
  EXPECT_NE(broken.out.find("CHECK FAILED"), std::string::npos) << broken.out;
  // It keeps the failed points' logs and says where: this test removes them.
  if (const size_t at = broken.out.find("/tmp/mimicfs-crashtest."); at != std::string::npos) {
    std::filesystem::remove_all(broken.out.substr(at, broken.out.find('/', at + 5) - at));
  }
  const CommandResult synced = run_command(
      {mimicfs_binary(), "crashtest", "--profile", "ext4", "--points", "6", "--workload",
       "printf data | dd of=\"$MIMICFS_MOUNT/f\" conv=fsync status=none && "
       "echo 1 >> \"$MIMICFS_CRASHTEST_DIR/acked\"",
       "--check", check});
  EXPECT_EQ(synced.exit_status, 0) << synced.out << synced.err;
  EXPECT_NE(synced.out.find("0 failed"), std::string::npos) << synced.out;
}

// The power cut ends the world: a writer the workload started in a session of
// its own (as pg_ctl starts a server) is killed at the cut, and is gone before
// the checker runs. Left alive it would go on writing after the restart (the
// workload that stops it at 40 acknowledgements is killed), and the point would
// fail: it outlives the power cut.
TEST_F(Run, CrashtestEndsWhatTheWorkloadLeftRunning) {
  const std::string acked = "\"$MIMICFS_CRASHTEST_DIR/acked\"";
  const std::string writer =
      "cd \"$MIMICFS_MOUNT\" && echo $$ > \"$MIMICFS_CRASHTEST_DIR/pid\" && "
      "for i in $(seq 4000); do sleep 0.01; echo $i | dd of=n conv=fsync status=none && "
      "echo $i > " +
      acked + "; done";
  const std::string workload = "setsid sh -c '" + writer +
                               "' </dev/null >/dev/null 2>&1 & "
                               "until a=$(cat " +
                               acked +
                               " 2>/dev/null) && [ \"${a:-0}\" -ge 40 ]; do sleep 0.01; done; "
                               "kill $!; wait $! || true";
  const std::string check =
      "! kill -0 $(cat \"$MIMICFS_CRASHTEST_DIR/pid\") 2>/dev/null && "
      "[ $(cat \"$MIMICFS_MOUNT/n\" 2>/dev/null || echo 0) -ge $(cat " +
      acked + " 2>/dev/null || echo 0) ]";
  const CommandResult result =
      run_command({mimicfs_binary(), "crashtest", "--profile", "ext4", "--points", "5",
                   "--workload", workload, "--check", check});
  EXPECT_EQ(result.exit_status, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("5 points, 0 failed"), std::string::npos) << result.out;
}

// --writeback P tears unsynced overwrites at the cut as `ctl crash writeback=P`
// does: with P = 1 every unit of the overwrite persists, so a file overwritten
// without fsync before the cut reads back new; without it, old.
TEST_F(Run, CrashtestWritebackPersistsUnsyncedOverwrites) {
  auto crashtest = [](std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        mimicfs_binary(), "crashtest", "--profile", "ext4", "--points", "1", "--op", "fsync",
        "--path", "/marker", "--when", "before", "--setup",
        "head -c 8192 /dev/zero | tr '\\0' A > \"$MIMICFS_MOUNT/f\"", "--workload",
        "head -c 8192 /dev/zero | tr '\\0' B | dd of=\"$MIMICFS_MOUNT/f\" conv=notrunc "
        "status=none && printf x | dd of=\"$MIMICFS_MOUNT/marker\" conv=fsync status=none",
        "--check", "grep -q B \"$MIMICFS_MOUNT/f\""};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_command(argv);
  };
  const CommandResult torn = crashtest({"--writeback", "1"});
  EXPECT_EQ(torn.exit_status, 0) << torn.out << torn.err;
  EXPECT_NE(torn.out.find("1 points, 0 failed"), std::string::npos) << torn.out;
  const CommandResult dropped = crashtest({});  // its logs stay in the test's TMPDIR
  EXPECT_EQ(dropped.exit_status, 1) << dropped.out << dropped.err;
  const CommandResult bad = crashtest({"--writeback", "1.5"});
  EXPECT_EQ(bad.exit_status, 2) << bad.err;
}

// A checker's `lost=N` lines are collected: per point, in the summary and in
// --json; --keep-logs keeps every point's log, passed or not.
TEST_F(Run, CrashtestCollectsWhatTheCheckerLostAndKeepsLogs) {
  const std::string json = make_temp_dir() + "/results.json";
  auto read_file = [](const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  const CommandResult result = run_command(
      {mimicfs_binary(), "crashtest", "--profile", "ext4", "--points", "3", "--workload",
       "for i in 1 2 3; do printf $i | dd of=\"$MIMICFS_MOUNT/f$i\" conv=fsync status=none; done",
       "--check", "echo checked; n=$(ls \"$MIMICFS_MOUNT\" | wc -l); echo lost=$((3 - n))",
       "--keep-logs", "--json", json});
  EXPECT_EQ(result.exit_status, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("  lost="), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("of the 3 points that reported it"), std::string::npos) << result.out;
  const nlohmann::json results = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(results["points"].size(), 3u) << results.dump(2);
  uint64_t total = 0;
  for (const auto& point : results["points"]) {
    ASSERT_TRUE(point["lost"].is_number()) << point.dump();
    total += point["lost"].get<uint64_t>();
  }
  EXPECT_EQ(results["lost"]["points"], 3);
  EXPECT_EQ(results["lost"]["total"], total);
  const size_t at = result.out.find("every point's log is in ");
  ASSERT_NE(at, std::string::npos) << result.out;
  const size_t start = at + std::string("every point's log is in ").size();
  const std::string logs = result.out.substr(start, result.out.find('\n', start) - start);
  for (const char* name : {"/point-1.log", "/point-2.log", "/point-3.log"}) {
    EXPECT_TRUE(std::filesystem::exists(logs + name)) << logs << name;
  }
  EXPECT_NE(read_file(logs + "/point-1.log").find("checked"), std::string::npos);
}

TEST_F(Run, CrashtestBadInputIsAUsageError) {
  const CommandResult no_check = run_command({mimicfs_binary(), "crashtest", "--workload", "true"});
  EXPECT_EQ(no_check.exit_status, 2) << no_check.err;
  const CommandResult bad_op = run_command(
      {mimicfs_binary(), "crashtest", "--op", "wrte", "--workload", "true", "--check", "true"});
  EXPECT_EQ(bad_op.exit_status, 2) << bad_op.err;
  EXPECT_NE(bad_op.err.find("unknown operation \"wrte\""), std::string::npos) << bad_op.err;
  EXPECT_EQ(std::count(bad_op.err.begin(), bad_op.err.end(), '\n'), 1) << bad_op.err;
  const CommandResult failing =
      run_command({mimicfs_binary(), "crashtest", "--workload", "true", "--check", "false"});
  EXPECT_EQ(failing.exit_status, 1) << failing.err;
  EXPECT_NE(failing.err.find("the checker fails without a crash"), std::string::npos)
      << failing.err;
}

}  // namespace
}  // namespace mimicfs::testing
