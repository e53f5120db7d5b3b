// SPDX-License-Identifier: Apache-2.0
#include "engine/namespace/namespace_journal.h"

#include <algorithm>
#include <unordered_set>

namespace mimicfs {

NamespaceJournal::Durability NamespaceJournal::durability_of(const Profile& profile) {
  if (profile.metadata_durability == "synchronous") return Durability::kSynchronous;
  if (profile.metadata_durability == "log_tree") return Durability::kLogTree;
  return Durability::kJournal;
}

void NamespaceJournal::add(Change change) {
  const Sequence sequence = first_ + changes_.size();
  by_inode_[change.inode].push_back(sequence);
  // Only a log tree's commit looks changes up by directory and by place.
  if (durability_ == Durability::kLogTree) {
    by_directory_[change.parent].push_back(sequence);
    if (change.kind == Change::Kind::kRenamed && change.from_parent != change.parent) {
      by_directory_[change.from_parent].push_back(sequence);
    }
    if (change.kind == Change::Kind::kRemoved) {
      removals_at_[{change.parent, change.name}].push_back(sequence);
    }
  }
  changes_.push_back(std::move(change));
  ++pending_;
}

std::vector<NamespaceJournal::Sequence>& NamespaceJournal::live(std::vector<Sequence>& sequences) {
  std::erase_if(sequences, [this](Sequence s) { return s < first_ || !changes_[s - first_]; });
  return sequences;
}

NamespaceJournal::Change NamespaceJournal::take(Sequence sequence) {
  std::optional<Change>& slot = changes_[sequence - first_];
  Change change = std::move(*slot);
  slot.reset();
  --pending_;
  while (!changes_.empty() && !changes_.front()) {
    changes_.pop_front();
    ++first_;
  }
  return change;
}

void NamespaceJournal::created(uint64_t inode, uint64_t parent, const std::string& name) {
  if (durability_ == Durability::kSynchronous) return;
  add({Change::Kind::kCreated, inode, parent, name, 0, {}});
}

void NamespaceJournal::renamed(uint64_t inode, uint64_t parent, const std::string& name,
                               uint64_t from_parent, const std::string& from_name) {
  if (durability_ == Durability::kSynchronous) return;
  add({Change::Kind::kRenamed, inode, parent, name, from_parent, from_name});
}

bool NamespaceJournal::removed(uint64_t inode, uint64_t parent, const std::string& name) {
  if (durability_ == Durability::kSynchronous) return false;
  add({Change::Kind::kRemoved, inode, parent, name, 0, {}});
  return true;
}

bool NamespaceJournal::creates(uint64_t inode) const {
  auto it = by_inode_.find(inode);
  if (it == by_inode_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(), [&](Sequence sequence) {
    return at(sequence).kind == Change::Kind::kCreated;
  });
}

std::vector<NamespaceJournal::Change> NamespaceJournal::commit(const SyncScope& scope) {
  if (durability_ != Durability::kLogTree) return commit_all();
  // The inodes whose every change is logged: the synced one, its ancestors (a
  // new directory on the path must exist for the name to be reachable, as
  // btrfs logs new ancestors), and for a directory each inode with an entry
  // change in it. Logging all of an inode's changes keeps the ones left
  // undoable newest first: none depends on a later one that stays.
  std::unordered_set<uint64_t> logged;
  std::vector<uint64_t> to_visit;
  auto log = [&](uint64_t inode) {
    if (logged.insert(inode).second) to_visit.push_back(inode);
  };
  log(scope.inode);
  for (const uint64_t ancestor : scope.ancestors) log(ancestor);
  if (scope.directory) {
    if (auto in_it = by_directory_.find(scope.inode); in_it != by_directory_.end()) {
      const std::vector<Sequence>& in_directory = live(in_it->second);
      // A rename out of the directory into another: btrfs marks the directory
      // (btrfs_record_unlink_dir) and its fsync commits the whole transaction.
      // Logging the moved inode alone could leave an undo that moves a
      // directory below itself.
      for (const Sequence sequence : in_directory) {
        const Change& change = at(sequence);
        if (change.kind == Change::Kind::kRenamed && change.from_parent == scope.inode &&
            change.parent != scope.inode) {
          return commit_all();
        }
      }
      for (const Sequence sequence : in_directory) log(at(sequence).inode);
    }
  }
  // A logged name replaces the entry removed there (btrfs replays the new
  // name over it): that removal is logged too, and with it the removed
  // inode's own changes. Every removal at a place is logged at once, so the
  // place leaves the index and is looked at once.
  while (!to_visit.empty()) {
    const uint64_t inode = to_visit.back();
    to_visit.pop_back();
    auto changes = by_inode_.find(inode);
    if (changes == by_inode_.end()) continue;
    for (const Sequence sequence : changes->second) {
      const Change& change = at(sequence);
      if (change.kind == Change::Kind::kRemoved) continue;
      auto removals = removals_at_.find(Place{change.parent, change.name});
      if (removals == removals_at_.end()) continue;
      for (const Sequence removal : live(removals->second)) log(at(removal).inode);
      removals_at_.erase(removals);
    }
  }
  std::vector<Sequence> sequences;
  for (const uint64_t inode : logged) {
    if (auto it = by_inode_.find(inode); it != by_inode_.end()) {
      sequences.insert(sequences.end(), it->second.begin(), it->second.end());
      by_inode_.erase(it);
    }
  }
  std::sort(sequences.begin(), sequences.end());
  std::vector<Change> committed;
  committed.reserve(sequences.size());
  for (const Sequence sequence : sequences) committed.push_back(take(sequence));
  return committed;
}

std::vector<NamespaceJournal::Change> NamespaceJournal::commit_all() {
  std::vector<Change> committed;
  committed.reserve(pending_);
  for (std::optional<Change>& change : changes_) {
    if (change) committed.push_back(std::move(*change));
  }
  first_ += changes_.size();
  changes_.clear();
  pending_ = 0;
  by_inode_.clear();
  by_directory_.clear();
  removals_at_.clear();
  return committed;
}

std::vector<NamespaceJournal::Change> NamespaceJournal::lose() {
  std::vector<Change> lost = commit_all();
  std::reverse(lost.begin(), lost.end());
  return lost;
}

}  // namespace mimicfs
