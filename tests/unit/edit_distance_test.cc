// SPDX-License-Identifier: Apache-2.0
// edit_distance: what names the closest command or profile key to a typo.
#include "engine/base/edit_distance.h"

#include <gtest/gtest.h>

namespace mimicfs {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("mount", "mount"), 0u);
  EXPECT_EQ(edit_distance("", "run"), 3u);
  EXPECT_EQ(edit_distance("stats", ""), 5u);
  EXPECT_EQ(edit_distance("mout", "mount"), 1u);     // an insertion
  EXPECT_EQ(edit_distance("mounts", "mount"), 1u);   // a deletion
  EXPECT_EQ(edit_distance("mound", "mount"), 1u);    // a substitution
  EXPECT_EQ(edit_distance("moutn", "mount"), 1u);    // two letters swapped
  EXPECT_EQ(edit_distance("omunt", "mount"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);  // no edit of a swapped pair again
  EXPECT_EQ(edit_distance("abc", "ca"), 3u);
}

}  // namespace
}  // namespace mimicfs
