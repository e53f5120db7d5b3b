// SPDX-License-Identifier: Apache-2.0
#include "engine/profile/profile_schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace mimicfs {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ProfileSchema, TheDocsKeyTableIsTheSchemasOwn) {
  const std::string doc = read_file(std::string(MIMICFS_SOURCE_DIR) + "/docs/profiles.md");
  const std::string begin = "<!-- keys: generated";
  const std::string end = "<!-- keys: end -->";
  const size_t from = doc.find('\n', doc.find(begin));
  const size_t to = doc.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(doc.substr(from + 1, to - from - 1), profile_keys_markdown())
      << "regenerate with: build/cli/mimicfs profiles keys";
}

TEST(ProfileSchema, EveryKeyIsDeclaredOnceWithHelp) {
  std::set<std::string_view> seen;
  for (const ProfileKey& key : profile_keys()) {
    EXPECT_TRUE(seen.insert(key.path).second) << key.path;
    EXPECT_FALSE(key.help.empty()) << key.path;
    EXPECT_EQ(find_profile_key(key.path), &key);
  }
  EXPECT_EQ(find_profile_key("device.nope"), nullptr);
}

TEST(ProfileSchema, EveryOptionalDefaultIsAcceptedByItsOwnRange) {
  const Profile defaults;
  for (const ProfileKey& key : profile_keys()) {
    if (key.required) continue;
    if (const auto* field = std::get_if<uint64_t Profile::*>(&key.field)) {
      EXPECT_GE(defaults.**field, key.min) << key.path;
      EXPECT_LE(defaults.**field, key.max) << key.path;
    }
  }
}

TEST(ProfileSchema, ConstraintsReadAsTheDocsSayThem) {
  EXPECT_EQ(describe_constraints(*find_profile_key("device.allocation_unit")),
            "bytes, power of two, 512..1 MiB");
  EXPECT_EQ(describe_constraints(*find_profile_key("allocation.placement")),
            "`goal` or `shared_cursor`");
  EXPECT_EQ(describe_constraints(*find_profile_key("cost.queue_depth")),
            "requests, 1..65536; optional, 1");
  EXPECT_EQ(describe_constraints(*find_profile_key("page_cache.dirty_unit")),
            "bytes, power of two, 1..1 MiB; optional, 4 KiB");
}

}  // namespace
}  // namespace mimicfs
