// SPDX-License-Identifier: Apache-2.0
// The differential conformance suite: every script of the fixed table and a
// seeded set of random ones run in a directory of the kernel filesystem a
// profile emulates (tmpfs for nfs, nfs42 and ideal; ext4, xfs and btrfs on
// loop devices) and in a mimicfs mount of that profile; every call's result
// and the final state of every entry must agree, but for the differences
// docs/conformance.md lists. Needs root (users, loop devices).
//
// MIMICFS_CONFORMANCE_SEED and MIMICFS_CONFORMANCE_RANDOM (scripts per
// profile) change the random part; a failure names the seed and the script,
// and shows the first MIMICFS_CONFORMANCE_SHOW (20) scripts that differ.
// MIMICFS_CONFORMANCE_ONLY=NAME runs that script alone and prints both
// transcripts in full; MIMICFS_CONFORMANCE_SCRIPT="TEXT" runs TEXT instead of
// the fixed table, and prints them too.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <toml++/toml.h>

#include "tests/conformance/reference_fs.h"
#include "tests/conformance/script.h"
#include "tests/conformance/table.h"
#include "tests/support/mounted_volume.h"

namespace mimicfs::conformance {
namespace {

using testing::MountedVolume;

struct Variant {
  std::string name;     // the test's name
  std::string profile;  // the built-in profile
  std::vector<std::string> extra;  // more `mimicfs mount` arguments
  // The scripts run on a second NFS client of the mount (--client-of).
  bool second_client = false;
};

std::ostream& operator<<(std::ostream& out, const Variant& v) { return out << v.name; }

uint64_t env_number(const char* name, uint64_t otherwise) {
  const char* value = std::getenv(name);
  return value && *value ? std::strtoull(value, nullptr, 0) : otherwise;
}

// The profile's fallocate modes and O_TMPFILE, from its effective TOML, less
// what the reference filesystem lacks (tmpfs has no FALLOC_FL_ZERO_RANGE):
// neither side of a comparison may refuse a call on purpose.
Features features_of(const std::string& profile) {
  const testing::CommandResult shown =
      testing::run_command({testing::mimicfs_binary(), "profiles", "show", profile});
  if (shown.exit_status != 0) throw std::runtime_error("profiles show " + profile + ": " + shown.err);
  const toml::table t = toml::parse(shown.out);
  Features f;
  f.tmpfile = t["namespace"]["tmpfile"].value_or(true);
  if (const toml::array* modes = t["fallocate"]["modes"].as_array()) {
    for (const toml::node& m : *modes) f.fallocate_modes.push_back(m.value_or(std::string()));
  }
  if (ReferenceFs::for_profile(profile) == "tmpfs") std::erase(f.fallocate_modes, "zero_range");
  return f;
}

bool runs_on(const Needs& needs, const Features& f) {
  if (needs.tmpfile && !f.tmpfile) return false;
  for (const std::string& mode : needs.fallocate_modes) {
    if (std::find(f.fallocate_modes.begin(), f.fallocate_modes.end(), mode) ==
        f.fallocate_modes.end()) {
      return false;
    }
  }
  return true;
}

// A fresh directory for one script, root's, mode 0777.
std::string fresh_directory(const std::string& root, size_t index) {
  const std::string dir = root + "/" + std::to_string(index);
  if (mkdir(dir.c_str(), 0777) != 0 || chmod(dir.c_str(), 0777) != 0) {
    throw std::runtime_error("mkdir " + dir + ": " + std::strerror(errno));
  }
  return dir;
}

// The first line where the two transcripts part, with the script, or empty.
std::string compare(const Script& script, const Transcript& expected, const Transcript& actual) {
  std::ostringstream out;
  auto header = [&] { out << script.name << "\n  script: " << script.text << "\n"; };
  if (!expected.error.empty() || !actual.error.empty()) {
    header();
    out << "  reference: " << expected.error << "\n  mimicfs:   " << actual.error << "\n";
    return out.str();
  }
  for (size_t i = 0; i < std::max(expected.steps.size(), actual.steps.size()); ++i) {
    const std::string want = i < expected.steps.size() ? expected.steps[i] : "(nothing)";
    const std::string got = i < actual.steps.size() ? actual.steps[i] : "(nothing)";
    if (want != got) {
      header();
      out << "  reference: " << want << "\n  mimicfs:   " << got << "\n";
      return out.str();
    }
  }
  if (expected.state != actual.state) {
    header();
    out << "  final state differs:\n";
    for (const std::string& line : expected.state) {
      if (std::find(actual.state.begin(), actual.state.end(), line) == actual.state.end()) {
        out << "    reference " << line << "\n";
      }
    }
    for (const std::string& line : actual.state) {
      if (std::find(expected.state.begin(), expected.state.end(), line) == expected.state.end()) {
        out << "    mimicfs   " << line << "\n";
      }
    }
    return out.str();
  }
  return {};
}

// Both transcripts in full, line by line, '!' where they part.
void print_side_by_side(const Transcript& want, const Transcript& got) {
  auto lines = [](const Transcript& t) {
    std::vector<std::string> all = t.steps;
    all.insert(all.end(), t.state.begin(), t.state.end());
    return all;
  };
  const std::vector<std::string> a = lines(want), b = lines(got);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string& x = i < a.size() ? a[i] : "";
    const std::string& y = i < b.size() ? b[i] : "";
    std::cout << (x == y ? "  " : "! ") << x << (x == y ? "" : "\n   mimicfs: " + y) << "\n";
  }
}

class Conformance : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    MIMICFS_REQUIRE_MOUNTABLE();
    if (geteuid() != 0) {
      if (testing::fuse_required()) FAIL() << "the conformance suite needs root";
      GTEST_SKIP() << "needs root (users, loop devices)";
    }
  }

  // Runs every script on both sides; fails with the first difference of each
  // script that differs (up to 20 shown).
  void check(const std::vector<Script>& scripts) {
    const Variant& v = GetParam();
    ReferenceFs reference(ReferenceFs::for_profile(v.profile));
    if (reference.path().empty()) {
      const bool required = std::getenv("MIMICFS_REQUIRE_MKFS") != nullptr;
      if (required) FAIL() << reference.error();
      GTEST_SKIP() << reference.error();
    }
    std::vector<std::string> extra = v.extra;
    std::string data_dir;
    for (std::string& word : extra) {
      if (word == "{data_dir}") word = data_dir = testing::make_temp_dir();
    }
    {
      MountedVolume server(v.profile, extra);
      ASSERT_TRUE(server.mounted()) << server.error();
      std::optional<MountedVolume> client;
      if (v.second_client) {
        client.emplace(testing::ClientOf{server});
        ASSERT_TRUE(client->mounted()) << client->error();
      }
      const MountedVolume& mounted = client ? *client : server;
      std::vector<std::string> differences;
      size_t statements = 0;
      const char* only = std::getenv("MIMICFS_CONFORMANCE_ONLY");
      for (size_t i = 0; i < scripts.size(); ++i) {
        if (only && scripts[i].name != only) continue;
        const Transcript want = run(scripts[i], fresh_directory(reference.path(), i));
        const Transcript got = run(scripts[i], fresh_directory(mounted.path(), i));
        if (only || scripts.size() == 1) print_side_by_side(want, got);
        statements += want.steps.size();
        std::string difference = compare(scripts[i], want, got);
        if (!difference.empty()) differences.push_back(std::move(difference));
      }
      std::cout << "[conformance] " << v.name << ": " << scripts.size() << " scripts, "
                << statements << " calls, " << differences.size() << " differ\n";
      std::string shown;
      const size_t show = env_number("MIMICFS_CONFORMANCE_SHOW", 20);
      for (size_t i = 0; i < std::min(differences.size(), show); ++i) shown += differences[i];
      EXPECT_TRUE(differences.empty())
          << differences.size() << " of " << scripts.size() << " scripts differ from "
          << ReferenceFs::for_profile(v.profile) << ":\n" << shown;
    }
    if (!data_dir.empty()) std::filesystem::remove_all(data_dir);
  }
};

TEST_P(Conformance, FixedTableAgreesWithTheKernel) {
  if (const char* text = std::getenv("MIMICFS_CONFORMANCE_SCRIPT")) {
    check({Script{"adhoc", text}});
    return;
  }
  const Features features = features_of(GetParam().profile);
  std::vector<Script> scripts;
  for (const TableScript& t : fixed_table()) {
    if (runs_on(t.needs, features)) scripts.push_back(t.script);
  }
  check(scripts);
}

TEST_P(Conformance, RandomScriptsAgreeWithTheKernel) {
  const uint64_t seed = env_number("MIMICFS_CONFORMANCE_SEED", 1);
  const int count = static_cast<int>(env_number("MIMICFS_CONFORMANCE_RANDOM", 200));
  std::cout << "[conformance] seed " << seed << " (MIMICFS_CONFORMANCE_SEED)\n";
  check(random_scripts(seed, count, 30, features_of(GetParam().profile)));
}

INSTANTIATE_TEST_SUITE_P(
    Profiles, Conformance,
    // The NFS client's silly rename departs from POSIX on purpose, and tmpfs
    // is no reference for it (docs/conformance.md): nfs_client_test.cc checks it.
    ::testing::Values(Variant{"nfs", "nfs", {"--set", "client.silly_rename=false"}},
                      Variant{"nfs42", "nfs42", {"--set", "client.silly_rename=false"}},
                      Variant{"ideal", "ideal", {}}, Variant{"ext4", "ext4", {}},
                      Variant{"xfs", "xfs", {}}, Variant{"btrfs", "btrfs", {}},
                      Variant{"ext4_data_dir", "ext4", {"--data-dir", "{data_dir}"}},
                      Variant{"nfs_second_client", "nfs", {"--set", "client.silly_rename=false"},
                              true}),
    [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

}  // namespace
}  // namespace mimicfs::conformance
