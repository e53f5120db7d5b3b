// SPDX-License-Identifier: Apache-2.0
#include "engine/namespace/namespace_journal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace mimicfs {
namespace {

TEST(NamespaceJournal, AJournalKeepsChangesUntilACommit) {
  NamespaceJournal journal(NamespaceJournal::Durability::kJournal);
  journal.created(20, 1, "a");
  journal.renamed(20, 1, "b", 1, "a");
  EXPECT_FALSE(journal.commit_all().empty());
  EXPECT_TRUE(journal.commit_all().empty()) << "nothing left for a second commit";
  EXPECT_TRUE(journal.lose().empty());
}

TEST(NamespaceJournal, APowerCutLosesTheUncommittedNewestFirst) {
  NamespaceJournal journal(NamespaceJournal::Durability::kJournal);
  journal.created(20, 1, "a");
  journal.renamed(20, 1, "b", 1, "a");
  const auto lost = journal.lose();
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].kind, NamespaceJournal::Change::Kind::kRenamed);
  EXPECT_EQ(lost[0].from_name, "a");
  EXPECT_EQ(lost[1].kind, NamespaceJournal::Change::Kind::kCreated);
  EXPECT_TRUE(journal.lose().empty());
}

TEST(NamespaceJournal, KnowsWhichInodesCreationIsPending) {
  NamespaceJournal journal(NamespaceJournal::Durability::kJournal);
  journal.created(20, 1, "a");
  journal.renamed(21, 1, "c", 1, "b");
  EXPECT_TRUE(journal.creates(20));
  EXPECT_FALSE(journal.creates(21));
  journal.commit_all();
  EXPECT_FALSE(journal.creates(20));
}

TEST(NamespaceJournal, ASynchronousServerCommitsEachChangeAtOnce) {
  NamespaceJournal journal(NamespaceJournal::Durability::kSynchronous);
  journal.created(20, 1, "a");
  journal.renamed(20, 1, "b", 1, "a");
  EXPECT_TRUE(journal.commit_all().empty());
  EXPECT_TRUE(journal.lose().empty());
}

TEST(NamespaceJournal, AJournalCommitsEverythingWithAnyInodesSync) {
  NamespaceJournal journal(NamespaceJournal::Durability::kJournal);
  journal.created(20, 1, "a");
  journal.created(21, 1, "b");
  EXPECT_FALSE(journal.commit({20, false, {1}}).empty());
  EXPECT_FALSE(journal.creates(21));
}

// btrfs: a file's fsync logs its own names and its new ancestors, not its neighbours.
TEST(NamespaceJournal, ALogTreeCommitsTheSyncedInodeAndItsAncestors) {
  NamespaceJournal journal(NamespaceJournal::Durability::kLogTree);
  journal.created(30, 1, "dir");
  journal.created(20, 30, "a");
  journal.renamed(20, 30, "b", 30, "a");
  journal.created(21, 1, "other");
  EXPECT_FALSE(journal.commit({20, false, {30, 1}}).empty());
  EXPECT_FALSE(journal.creates(20));
  EXPECT_FALSE(journal.creates(30)) << "its new directory is logged with it";
  const auto lost = journal.lose();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].inode, 21u);
}

TEST(NamespaceJournal, ALogTreeCommitsADirectorysEntriesAtItsSync) {
  NamespaceJournal journal(NamespaceJournal::Durability::kLogTree);
  journal.created(20, 1, "in-root");
  journal.created(40, 1, "dir");
  journal.created(22, 1, "x");  // in the root, then moved into dir
  journal.renamed(22, 40, "moved-in", 1, "x");
  journal.created(23, 40, "stays");
  journal.renamed(23, 40, "renamed", 40, "stays");
  EXPECT_TRUE(journal.commit({50, false, {1}}).empty()) << "an inode with nothing pending";
  EXPECT_FALSE(journal.commit({40, true, {1}}).empty());
  const auto lost = journal.lose();
  ASSERT_EQ(lost.size(), 1u) << "what the root's fsync would take";
  EXPECT_EQ(lost[0].inode, 20u);
}

// A rename out of a directory into another: btrfs's fsync of that directory
// commits the whole transaction (the moved inode's new ancestors may have moved too).
TEST(NamespaceJournal, ALogTreeDirectoryFsyncAfterARenameOutOfItCommitsEverything) {
  NamespaceJournal journal(NamespaceJournal::Durability::kLogTree);
  journal.renamed(50, 1, "Y", 60, "Y");   // /O/Q/P/Y -> /Y
  journal.renamed(70, 50, "Q", 80, "Q");  // /O/Q -> /Y/Q
  EXPECT_FALSE(journal.commit({80, true, {1}}).empty());
  EXPECT_TRUE(journal.lose().empty());
}

// A commit costs what it commits, not what is pending: with 100,000 removals
// in one directory, a file's fsync elsewhere takes none of them and the
// directory's fsync takes them all. The bound is 100x what an unsanitized
// build takes; the commit that scanned the list per removal took minutes.
TEST(NamespaceJournal, ALogTreeCommitOfManyRemovalsIsNotQuadratic) {
  constexpr uint64_t kRemovals = 100'000;
  constexpr uint64_t kDir = 40;
  NamespaceJournal journal(NamespaceJournal::Durability::kLogTree);
  for (uint64_t i = 0; i < kRemovals; ++i) {
    journal.removed(1000 + i, kDir, "r" + std::to_string(i));
  }
  journal.created(20, 1, "elsewhere");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(journal.commit({20, false, {1}}).size(), 1u);
  EXPECT_EQ(journal.pending(), kRemovals);
  EXPECT_EQ(journal.commit({kDir, true, {1}}).size(), kRemovals);
  EXPECT_EQ(journal.pending(), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// A logged name replaces the entry removed there, and the removed inode's own
// changes are logged with that removal, and so on: a chain is followed to its end.
TEST(NamespaceJournal, ALogTreeFollowsReplacedNamesToTheEnd) {
  NamespaceJournal journal(NamespaceJournal::Durability::kLogTree);
  journal.removed(22, 1, "b");              // unlink b (inode 22)
  journal.created(21, 1, "b");              // a new b (inode 21)
  journal.renamed(21, 1, "a", 1, "b");      // b -> a
  journal.created(20, 1, "tmp");
  journal.removed(21, 1, "a");              // tmp over a
  journal.renamed(20, 1, "a", 1, "tmp");
  journal.created(30, 1, "unrelated");
  EXPECT_EQ(journal.commit({20, false, {1}}).size(), 6u);
  const auto lost = journal.lose();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].inode, 30u);
}

TEST(NamespaceJournal, DurabilityComesFromTheProfile) {
  Profile p;
  p.metadata_durability = "synchronous";
  EXPECT_EQ(NamespaceJournal::durability_of(p), NamespaceJournal::Durability::kSynchronous);
  p.metadata_durability = "journal";
  EXPECT_EQ(NamespaceJournal::durability_of(p), NamespaceJournal::Durability::kJournal);
  p.metadata_durability = "log_tree";
  EXPECT_EQ(NamespaceJournal::durability_of(p), NamespaceJournal::Durability::kLogTree);
}

}  // namespace
}  // namespace mimicfs
