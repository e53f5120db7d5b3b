// SPDX-License-Identifier: Apache-2.0
// The command line's promises: bad input gets one clear line and exit status 2,
// and never leaves a half-mounted directory; a signal unmounts cleanly.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

// gmock is not in Debian's libgtest-dev; a substring check is all these need.
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// One line on stderr, nothing on stdout, exit status 2.
void ExpectUsageError(const CommandResult& r, const std::string& mentions) {
  EXPECT_EQ(r.exit_status, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, mentions));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

class CommandLine : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir(); }
  void TearDown() override {
    EXPECT_FALSE(is_mounted(dir_)) << "a failed mount left " << dir_ << " mounted";
    std::filesystem::remove_all(dir_);
  }
  CommandResult Mimicfs(std::vector<std::string> args) {
    args.insert(args.begin(), mimicfs_binary());
    return run_command(args);
  }
  std::string dir_;
};

TEST_F(CommandLine, AnUnknownCommandIsNamedWithTheClosestOne) {
  const CommandResult typo = Mimicfs({"mout", dir_});
  ExpectUsageError(typo, "unknown command \"mout\"");
  EXPECT_TRUE(Contains(typo.err, "did you mean \"mount\"?"));
  // Two letters swapped: one edit.
  EXPECT_TRUE(Contains(Mimicfs({"moutn", dir_}).err, "did you mean \"mount\"?"));
  EXPECT_TRUE(Contains(Mimicfs({"crahstest"}).err, "did you mean \"crashtest\"?"));
  const CommandResult unrelated = Mimicfs({"frobnicate"});
  ExpectUsageError(unrelated, "unknown command \"frobnicate\" (try --help)");
  EXPECT_EQ(unrelated.out, "");
}

TEST_F(CommandLine, UnknownProfileListsTheKnownOnes) {
  auto r = Mimicfs({"mount", "--profile", "zfs", dir_});
  ExpectUsageError(r, "unknown profile \"zfs\"");
  EXPECT_TRUE(Contains(r.err, "ideal, nfs"));
}

TEST_F(CommandLine, InvalidProfileFileNamesFileLineAndKey) {
  const std::string file = dir_ + ".toml";
  std::ofstream(file) << "base = \"nfs\"\n\n[device]\nallocation_unit = 1000\n";
  auto r = Mimicfs({"mount", "--profile-file", file, dir_});
  std::filesystem::remove(file);
  ExpectUsageError(r, file + ":4: device.allocation_unit: must be a power of two");
}

TEST_F(CommandLine, MalformedProfileFileNamesTheLine) {
  const std::string file = dir_ + ".toml";
  std::ofstream(file) << "name = \"x\"\n[device\n";
  auto r = Mimicfs({"mount", "--profile-file", file, dir_});
  std::filesystem::remove(file);
  ExpectUsageError(r, file + ":2: invalid TOML");
}

TEST_F(CommandLine, UnknownKeyIsNamed) {
  const std::string file = dir_ + ".toml";
  std::ofstream(file) << "base = \"nfs\"\n[statfs]\nblocksize = 4096\n";
  auto r = Mimicfs({"mount", "--profile-file", file, dir_});
  std::filesystem::remove(file);
  ExpectUsageError(r, ":3: statfs.blocksize: unknown key");
}

TEST_F(CommandLine, MissingMountpoint) {
  ExpectUsageError(Mimicfs({"mount", dir_ + "/absent"}), "No such file or directory");
}

TEST_F(CommandLine, MountpointThatIsAFile) {
  std::ofstream(dir_ + "/file") << "x";
  ExpectUsageError(Mimicfs({"mount", dir_ + "/file"}), "not a directory");
}

TEST_F(CommandLine, MountpointThatIsNotEmpty) {
  std::ofstream(dir_ + "/file") << "x";
  ExpectUsageError(Mimicfs({"mount", dir_}), "not empty");
}

TEST_F(CommandLine, UnknownOptionAndMissingSubcommand) {
  ExpectUsageError(Mimicfs({"mount", "--bogus", dir_}), "--bogus");
  ExpectUsageError(Mimicfs({}), "subcommand");
}

TEST_F(CommandLine, HelpAndVersionSucceed) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--help"},
                                                                {"mount", "--help"},
                                                                {"profiles", "--help"},
                                                                {"stats", "--help"},
                                                                {"ctl", "--help"},
                                                                {"--version"}}) {
    auto r = Mimicfs(args);
    EXPECT_EQ(r.exit_status, 0) << args[0];
    EXPECT_FALSE(r.out.empty()) << args[0];
  }
}

// `mimicfs help` is --help; `help COMMAND` the command's.
// `mimicfs completion bash`: generated from the command line's definitions,
// it completes subcommands, nested ones, option names and profile names.
TEST_F(CommandLine, BashCompletionOffersCommandsOptionsAndProfiles) {
  const std::string script = dir_ + ".bash";
  const CommandResult generated = Mimicfs({"completion", "bash"});
  ASSERT_EQ(generated.exit_status, 0) << generated.err;
  std::ofstream(script) << generated.out;
  const auto completed = run_command(
      {"bash", "-c",
       "source '" + script +
           "' && t() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _mimicfs; "
           "echo \"${COMPREPLY[*]}\"; } && t mimicfs mo && t mimicfs mount --pro && "
           "t mimicfs run --profile nfs && t mimicfs profiles s && t mimicfs stats /m --so"});
  std::filesystem::remove(script);
  ASSERT_EQ(completed.exit_status, 0) << completed.err;
  EXPECT_EQ(completed.out, "mount\n--profile --profile-file\nnfs nfs42\nshow\n--sort\n");
  ExpectUsageError(Mimicfs({"completion", "zsh"}), "zsh");
}

TEST_F(CommandLine, HelpCommandPrintsTheHelp) {
  auto all = Mimicfs({"help"});
  EXPECT_EQ(all.exit_status, 0) << all.err;
  EXPECT_EQ(all.out, Mimicfs({"--help"}).out);
  auto ctl = Mimicfs({"help", "ctl"});
  EXPECT_EQ(ctl.exit_status, 0) << ctl.err;
  EXPECT_TRUE(Contains(ctl.out, "Usage: mimicfs ctl")) << ctl.out;
  EXPECT_TRUE(Contains(ctl.out, "crash [hold|freeze]")) << ctl.out;
  ExpectUsageError(Mimicfs({"help", "mnt"}), "help: no command \"mnt\"");
}

// `run --stats-out` to a path that cannot be written is refused before the
// command runs.
TEST_F(CommandLine, RunRefusesAnUnwritableStatsOut) {
  const std::string marker = dir_ + "/ran";
  ExpectUsageError(
      Mimicfs({"run", "--stats-out", dir_ + "/no/such/dir/stats.json", "--", "touch", marker}),
      "--stats-out " + dir_ + "/no/such/dir/stats.json: no directory");
  ExpectUsageError(Mimicfs({"run", "--stats-out", dir_, "--", "touch", marker}), "is a directory");
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran";
}

// --set goes through the same validation as a profile file, and a refused
// override mounts nothing.
TEST_F(CommandLine, BadOverrideIsAUsageError) {
  ExpectUsageError(
      Mimicfs({"mount", "--profile", "xfs", "--set", "allocation.placement=best", dir_}),
      "--set allocation.placement: unknown placement \"best\"");
  ExpectUsageError(Mimicfs({"mount", "--set", "device.allocation_unit=1000", dir_}),
                   "--set device.allocation_unit: must be a power of two");
  ExpectUsageError(Mimicfs({"mount", "--set", "allocation.speed=3", dir_}),
                   "--set allocation.speed: unknown key");
  ExpectUsageError(Mimicfs({"mount", "--set", "allocation.copy_on_write", dir_}),
                   "--set allocation.copy_on_write: expected KEY=VALUE");
  ExpectUsageError(Mimicfs({"mount", "--profile", "ext4", "--set",
                            "allocation.speculative_preallocation=true", dir_}),
                   "--set allocation.speculative_preallocation: cannot be combined with "
                   "allocation.inode_window_max_bytes");
  // The message does not repeat the key it names.
  ExpectUsageError(Mimicfs({"mount", "--set", "device.allocation_group_bytes=1", dir_}),
                   "--set device.allocation_group_bytes: 1 must be a multiple of "
                   "device.allocation_unit (512)");
}

// A file that starts from a built-in and overrides one key: `profiles show` prints
// the effective TOML, every key present, and it mounts.
TEST_F(CommandLine, ProfileFileInheritsFromABuiltin) {
  const std::string file = dir_ + "-xfs-allocsize-4k.toml";
  std::ofstream(file) << "base = \"xfs\"\n[allocation]\nspeculative_preallocation = false\n";
  auto show = Mimicfs({"profiles", "show", file});
  EXPECT_EQ(show.exit_status, 0) << show.err;
  EXPECT_TRUE(Contains(show.out, "speculative_preallocation = false"));
  EXPECT_TRUE(Contains(show.out, "placement = 'shared_cursor'"));
  EXPECT_TRUE(Contains(show.out, "geometry = 'mkfs.xfs'"));
  auto overridden = Mimicfs({"profiles", "show", "xfs", "--set", "allocation.placement=goal"});
  EXPECT_EQ(overridden.exit_status, 0) << overridden.err;
  EXPECT_TRUE(Contains(overridden.out, "placement = 'goal'"));
  auto bad_line = dir_ + "-bad.toml";
  std::ofstream(bad_line) << "base = \"xfs\"\n\n[allocation]\nspeculative_preallocation = 1\n";
  ExpectUsageError(Mimicfs({"profiles", "show", bad_line}),
                   bad_line + ":4: allocation.speculative_preallocation: expected true or false");
  std::filesystem::remove(file);
  std::filesystem::remove(bad_line);
}

TEST_F(CommandLine, ProfilesListsAndShows) {
  auto list = Mimicfs({"profiles"});
  EXPECT_EQ(list.exit_status, 0);
  EXPECT_TRUE(Contains(list.out, "nfs"));
  EXPECT_TRUE(Contains(list.out, "ideal"));
  auto show = Mimicfs({"profiles", "show", "nfs"});
  EXPECT_EQ(show.exit_status, 0);
  EXPECT_TRUE(Contains(show.out, "allocation_unit = 512"));
  EXPECT_TRUE(Contains(show.out, "block_size = 1048576"));
  ExpectUsageError(Mimicfs({"profiles", "show", "zfs"}), "unknown profile");
  for (const char* name : {"nfs42", "ext4", "xfs", "btrfs"}) {
    EXPECT_TRUE(Contains(list.out, name));
    EXPECT_EQ(Mimicfs({"profiles", "show", name}).exit_status, 0) << name;
  }
}

TEST_F(CommandLine, UnusableFuseDeviceIsAUsageError) {
  // In a private mount namespace, hide /dev/fuse behind an empty regular file.
  if (geteuid() != 0 || run_command({"unshare", "-m", "true"}).exit_status != 0) {
    GTEST_SKIP() << "needs root and unshare -m";
  }
  const std::string script =
      "mount --bind \"$1\" /dev/fuse && exec \"$2\" mount --profile nfs \"$3\"";
  std::ofstream(dir_ + "/empty").flush();
  std::filesystem::create_directory(dir_ + "/mnt");
  auto r = run_command({"unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                        dir_ + "/empty", mimicfs_binary(), dir_ + "/mnt"});
  ExpectUsageError(r, "cannot use /dev/fuse");
  EXPECT_FALSE(is_mounted(dir_ + "/mnt"));
}

TEST_F(CommandLine, StatsAndCtlOnAPlainDirectoryFail) {
  ExpectUsageError(Mimicfs({"stats", dir_}), "is not a mimicfs mount");
  ExpectUsageError(Mimicfs({"ctl", dir_, "reset"}), "is not a mimicfs mount");
}

// `relative`: the mountpoint is given relative to the working directory,
// which the daemon leaves for / (it used to stay mounted, its daemon gone).
void ExpectSigtermUnmounts(bool relative) {
  const std::string dir = make_temp_dir();
  const std::filesystem::path path(dir);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (relative && chdir(path.parent_path().c_str()) != 0) _exit(126);
    const std::string given = relative ? path.filename().string() : dir;
    execl(mimicfs_binary().c_str(), "mimicfs", "mount", "--foreground", "--log-level", "off",
          given.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100 && !is_mounted(dir); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(is_mounted(dir));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(is_mounted(dir));
  if (is_mounted(dir)) run_command({"fusermount3", "-u", "-z", dir});
  std::filesystem::remove(dir);
}

TEST(MountLifecycle, SigtermUnmountsAForegroundMount) {
  MIMICFS_REQUIRE_MOUNTABLE();
  ExpectSigtermUnmounts(false);
}

TEST(MountLifecycle, SigtermUnmountsAMountGivenByARelativePath) {
  MIMICFS_REQUIRE_MOUNTABLE();
  ExpectSigtermUnmounts(true);
}

// `mimicfs stats` on many files: sorted, the first N with the rest summed, a
// totals line, a line per directory, and a table that fits the width given.
// A tree the size of a small PostgreSQL cluster (1000 files, long paths) at
// 80, 120 and 200 columns: every line fits, each ranked row keeps its file
// name whole, and every value shown is whole (the same words as --wide's row),
// whole columns dropped instead.
TEST(MountLifecycle, StatsFitsAThousandFilesAt80120And200Columns) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  std::vector<std::string> names;
  for (int i = 0; i < 1000; ++i) {
    const std::string dir = fmt::format("base/{}/pg_tblspc_directory_{}", 16384 + i % 7, i % 5);
    std::filesystem::create_directories(vol.file(dir));
    names.push_back(fmt::format("{}/{}_fsm", dir, 16400 + i));
    std::ofstream(vol.file(names.back())) << std::string(4096 * (i % 9 + 1), 'x');
  }
  const auto table = [&](std::vector<std::string> width) {
    std::vector<std::string> argv = {mimicfs_binary(), "stats",  vol.path(), "--sort",
                                     "size",           "--top", "20"};
    argv.insert(argv.end(), width.begin(), width.end());
    const CommandResult r = run_command(argv);
    EXPECT_EQ(r.exit_status, 0) << r.err;
    std::vector<std::string> lines;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    const auto header = std::find_if(lines.begin(), lines.end(),
                                     [](const auto& l) { return l.starts_with("file "); });
    return std::vector<std::string>(header, lines.end());
  };
  const auto words = [](const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    for (std::string word; in >> word;) out.push_back(word);
    return out;
  };
  const std::vector<std::string> wide = table({"--wide"});
  ASSERT_EQ(wide.size(), 23u) << "header, 20 files, the rest, the total";
  for (const size_t width : {80u, 120u, 200u}) {
    const std::vector<std::string> fitted = table({"--width", std::to_string(width)});
    ASSERT_EQ(fitted.size(), wide.size()) << width;
    for (size_t row = 0; row < fitted.size(); ++row) {
      const std::string& line = fitted[row];
      EXPECT_LE(line.size(), width) << line;
      std::vector<std::string> narrow = words(line), whole = words(wide[row]);
      if (row >= 1 && row <= 20) {
        const std::string path = whole.front();
        const std::string base = path.substr(path.rfind('/'));
        EXPECT_TRUE(narrow.front().ends_with(base)) << width << ": " << line;
        EXPECT_TRUE(narrow.front().starts_with("/base/1")) << width << ": " << line;
      }
      for (size_t i = 1; i < narrow.size(); ++i) {
        EXPECT_NE(std::find(whole.begin(), whole.end(), narrow[i]), whole.end())
            << width << ": \"" << narrow[i] << "\" is not a whole value of " << wide[row];
      }
      if (row == 0) EXPECT_NE(narrow.back(), "extent") << "a title cut: " << line;
    }
    if (width == 200) EXPECT_TRUE(Contains(fitted[0], "extent sizes")) << fitted[0];
  }
}

TEST(MountLifecycle, StatsTableSortsSumsAndFits) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(mkdir(vol.file("base").c_str(), 0755), 0);
  const std::string long_name =
      "base/a_relation_file_name_long_enough_to_be_cut_in_the_middle_of_it";
  std::ofstream(vol.file("small")) << "x";
  std::ofstream(vol.file("base/big")) << std::string(64 * 1024, 'b');
  std::ofstream(vol.file(long_name)) << std::string(8 * 1024, 'l');
  const auto lines_of = [](const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  };
  const auto sorted = run_command(
      {mimicfs_binary(), "stats", vol.path(), "--sort", "size", "--top", "2", "--width", "80"});
  ASSERT_EQ(sorted.exit_status, 0) << sorted.err;
  std::vector<std::string> lines = lines_of(sorted.out);
  const auto file_header = std::find_if(lines.begin(), lines.end(),
                                        [](const auto& l) { return l.starts_with("file "); });
  ASSERT_NE(file_header, lines.end()) << sorted.out;
  ASSERT_GE(lines.end() - file_header, 5) << sorted.out;
  EXPECT_TRUE(file_header[1].starts_with("/base/big ")) << sorted.out;
  EXPECT_TRUE(file_header[2].starts_with("/base/a_rel")) << sorted.out;
  EXPECT_TRUE(Contains(file_header[2], "...")) << "cut in the middle: " << file_header[2];
  EXPECT_TRUE(file_header[3].starts_with("(1 more file)")) << sorted.out;
  EXPECT_TRUE(file_header[4].starts_with("total ")) << sorted.out;
  EXPECT_TRUE(Contains(file_header[4], "3 files")) << sorted.out;
  for (auto it = file_header; it != file_header + 5; ++it) {
    EXPECT_LE(it->size(), 80u) << *it;
  }
  const auto by_dir =
      run_command({mimicfs_binary(), "stats", vol.path(), "--by-dir", "--sort", "allocated"});
  ASSERT_EQ(by_dir.exit_status, 0) << by_dir.err;
  lines = lines_of(by_dir.out);
  const auto dir_header = std::find_if(lines.begin(), lines.end(),
                                       [](const auto& l) { return l.starts_with("directory "); });
  ASSERT_NE(dir_header, lines.end()) << by_dir.out;
  ASSERT_GE(lines.end() - dir_header, 4) << by_dir.out;
  EXPECT_TRUE(dir_header[1].starts_with("/base ")) << by_dir.out;
  EXPECT_TRUE(dir_header[1].ends_with(" 2")) << "two files in it: " << dir_header[1];
  EXPECT_TRUE(dir_header[2].starts_with("/ ")) << by_dir.out;
  EXPECT_TRUE(dir_header[3].starts_with("total ")) << by_dir.out;
  const auto bad = run_command({mimicfs_binary(), "stats", vol.path(), "--sort", "colour"});
  EXPECT_EQ(bad.exit_status, 2) << bad.err;

  // --json follows --sort, --top and --by-dir: the table's lines as "rows".
  const auto top_json = run_command(
      {mimicfs_binary(), "stats", vol.path(), "--json", "--sort", "size", "--top", "2"});
  ASSERT_EQ(top_json.exit_status, 0) << top_json.err;
  const nlohmann::json top = nlohmann::json::parse(top_json.out);
  ASSERT_EQ(top["rows"]["lines"].size(), 2u) << top["rows"];
  EXPECT_EQ(top["rows"]["lines"][0]["path"], "/base/big");
  EXPECT_EQ(top["rows"]["lines"][1]["path"], "/" + long_name);
  EXPECT_EQ(top["rows"]["rest"]["files"], 1);
  EXPECT_EQ(top["rows"]["total"]["files"], 3);
  EXPECT_EQ(top["files"].size(), 2u) << "only the top files";
  const auto dir_json = run_command(
      {mimicfs_binary(), "stats", vol.path(), "--json", "--by-dir", "--sort", "allocated"});
  ASSERT_EQ(dir_json.exit_status, 0) << dir_json.err;
  const nlohmann::json dirs = nlohmann::json::parse(dir_json.out)["rows"];
  EXPECT_EQ(dirs["by"], "directory");
  ASSERT_EQ(dirs["lines"].size(), 2u) << dirs;
  EXPECT_EQ(dirs["lines"][0]["directory"], "/base");
  EXPECT_EQ(dirs["lines"][0]["files"], 2);
  EXPECT_FALSE(dirs.contains("rest"));
  const auto by_name =
      run_command({mimicfs_binary(), "stats", vol.path(), "--json", "--sort", "name"});
  ASSERT_EQ(by_name.exit_status, 0) << by_name.err;
  EXPECT_EQ(nlohmann::json::parse(by_name.out)["rows"]["lines"].size(), 3u) << "--sort name too";

  // In a pipe the table fits 100 columns, unless --wide.
  const auto piped = run_command({mimicfs_binary(), "stats", vol.path()});
  ASSERT_EQ(piped.exit_status, 0) << piped.err;
  bool long_name_whole = false;
  for (const std::string& line : lines_of(piped.out)) {
    EXPECT_LE(line.size(), 100u) << line;
    long_name_whole |= Contains(line, long_name);
  }
  EXPECT_FALSE(long_name_whole) << "cut in the middle at 100 columns";
  const auto wide = run_command({mimicfs_binary(), "stats", vol.path(), "--wide"});
  ASSERT_EQ(wide.exit_status, 0) << wide.err;
  EXPECT_TRUE(Contains(wide.out, long_name)) << wide.out;
}

TEST(MountLifecycle, StatsAndCtlCommandsReadTheMount) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  std::ofstream(vol.file("t1")) << "hello";
  auto table = run_command({mimicfs_binary(), "stats", vol.path()});
  EXPECT_EQ(table.exit_status, 0) << table.err;
  EXPECT_TRUE(Contains(table.out, "/t1"));
  auto json = run_command({mimicfs_binary(), "stats", vol.path(), vol.file("t1"), "--json"});
  EXPECT_EQ(json.exit_status, 0) << json.err;
  auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["files"]["/t1"]["size"], 5);
  EXPECT_EQ(parsed["files"]["/t1"]["allocated_bytes"], 512);

  EXPECT_EQ(run_command({mimicfs_binary(), "ctl", vol.path(), "reset"}).exit_status, 0);
  EXPECT_FALSE(vol.stats()["ops"].contains("write"));
  std::filesystem::remove(vol.file("t1"));  // empty, as it lists: still refused
  ExpectUsageError(run_command({mimicfs_binary(), "mount", vol.path()}), "already a mimicfs mount");
  EXPECT_TRUE(vol.stats()["ops"].contains("unlink")) << "the first daemon still serves it";
  ExpectUsageError(run_command({mimicfs_binary(), "ctl", vol.path(), "explode"}),
                   "unknown command");
}

TEST(MountLifecycle, CtlServerDownOnALocalProfileSaysThereIsNoServer) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ExpectUsageError(run_command({mimicfs_binary(), "ctl", vol.path(), "server", "down"}),
                   "has no server");
}

}  // namespace
}  // namespace mimicfs::testing
