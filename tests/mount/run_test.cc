// `mimicfs run`: the command runs on a temporary mount named by MIMICFS_MOUNT,
// the run ends with the command's status, writes the final stats, and never
// leaves a mount or a directory behind, whatever the command did.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

// Mounts and directories `mimicfs run` made and left; empty when it cleaned up.
std::string leftovers() {
  std::string found;
  std::ifstream mounts("/proc/mounts");
  for (std::string line; std::getline(mounts, line);) {
    if (line.find("/tmp/mimicfs-run.") != std::string::npos) found += "mounted: " + line + "\n";
  }
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().filename().string().starts_with("mimicfs-run.")) {
      found += "left: " + entry.path().string() + "\n";
    }
  }
  return found;
}

class Run : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fuse_unusable_reason().empty()) {
      if (fuse_required()) FAIL() << fuse_unusable_reason();
      GTEST_SKIP() << fuse_unusable_reason();
    }
    ASSERT_EQ(leftovers(), "") << "from an earlier run";
  }
  void TearDown() override { EXPECT_EQ(leftovers(), ""); }
};

TEST_F(Run, ExitsWithTheCommandsStatusAndWritesTheStats) {
  const std::string stats_file = make_temp_dir() + "/stats.json";
  auto r = run_command({mimicfs_binary(), "run", "--profile", "ext4", "--set",
                        "allocation.writeback_bytes=0", "--stats-out", stats_file, "--", "sh", "-c",
                        "test -d \"$MIMICFS_MOUNT\" && "
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

}  // namespace
}  // namespace mimicfs::testing
