// SPDX-License-Identifier: Apache-2.0
// TwoClients: a mount of the test's NFS profile (A, GetParam()) and a second
// client of its server (B, `mount --client-of`), for the mount tests of
// several clients (docs/nfs.md).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {

class TwoClients : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    MIMICFS_REQUIRE_MOUNTABLE();
    a_.emplace(GetParam());
    ASSERT_TRUE(a_->mounted()) << a_->error();
    b_.emplace(ClientOf{*a_});
    ASSERT_TRUE(b_->mounted()) << b_->error();
  }
  MountedVolume& a() { return *a_; }
  MountedVolume& b() { return *b_; }
  // B first: a client's daemon is A's.
  void TearDown() override {
    b_.reset();
    a_.reset();
  }

  std::optional<MountedVolume> a_;
  std::optional<MountedVolume> b_;
};

}  // namespace mimicfs::testing
