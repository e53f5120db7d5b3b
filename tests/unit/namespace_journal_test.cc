#include "backends/namespace_journal.h"

#include <gtest/gtest.h>

namespace mimicfs {
namespace {

TEST(NamespaceJournal, AJournalKeepsChangesUntilACommit) {
  NamespaceJournal journal(NamespaceJournal::Durability::kJournal);
  journal.created(20, 1, "a");
  journal.renamed(20, 1, "b", 1, "a");
  EXPECT_TRUE(journal.commit());
  EXPECT_FALSE(journal.commit()) << "nothing left for a second commit";
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
  journal.commit();
  EXPECT_FALSE(journal.creates(20));
}

TEST(NamespaceJournal, ASynchronousServerCommitsEachChangeAtOnce) {
  NamespaceJournal journal(NamespaceJournal::Durability::kSynchronous);
  journal.created(20, 1, "a");
  journal.renamed(20, 1, "b", 1, "a");
  EXPECT_FALSE(journal.commit());
  EXPECT_TRUE(journal.lose().empty());
}

TEST(NamespaceJournal, DurabilityComesFromTheProfile) {
  Profile p;
  p.namespace_durability = "synchronous";
  EXPECT_EQ(NamespaceJournal::durability_of(p), NamespaceJournal::Durability::kSynchronous);
  p.namespace_durability = "journal";
  EXPECT_EQ(NamespaceJournal::durability_of(p), NamespaceJournal::Durability::kJournal);
}

}  // namespace
}  // namespace mimicfs
