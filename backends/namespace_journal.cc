#include "backends/namespace_journal.h"

#include <algorithm>

namespace mimicfs {

NamespaceJournal::Durability NamespaceJournal::durability_of(const Profile& profile) {
  return profile.namespace_durability == "synchronous" ? Durability::kSynchronous
                                                       : Durability::kJournal;
}

void NamespaceJournal::created(uint64_t inode, uint64_t parent, const std::string& name) {
  if (durability_ == Durability::kSynchronous) return;
  uncommitted_.push_back({Change::Kind::kCreated, inode, parent, name, 0, {}});
}

void NamespaceJournal::renamed(uint64_t inode, uint64_t parent, const std::string& name,
                               uint64_t from_parent, const std::string& from_name) {
  if (durability_ == Durability::kSynchronous) return;
  uncommitted_.push_back({Change::Kind::kRenamed, inode, parent, name, from_parent, from_name});
}

bool NamespaceJournal::creates(uint64_t inode) const {
  return std::any_of(uncommitted_.begin(), uncommitted_.end(), [&](const Change& change) {
    return change.kind == Change::Kind::kCreated && change.inode == inode;
  });
}

bool NamespaceJournal::commit() {
  const bool any = !uncommitted_.empty();
  uncommitted_.clear();
  return any;
}

std::vector<NamespaceJournal::Change> NamespaceJournal::lose() {
  std::vector<Change> lost = std::move(uncommitted_);
  uncommitted_.clear();
  std::reverse(lost.begin(), lost.end());
  return lost;
}

}  // namespace mimicfs
