#include "backends/namespace_journal.h"

#include <algorithm>
#include <unordered_set>

namespace mimicfs {

NamespaceJournal::Durability NamespaceJournal::durability_of(const Profile& profile) {
  if (profile.metadata_durability == "synchronous") return Durability::kSynchronous;
  if (profile.metadata_durability == "log_tree") return Durability::kLogTree;
  return Durability::kJournal;
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

bool NamespaceJournal::removed(uint64_t inode, uint64_t parent, const std::string& name) {
  if (durability_ == Durability::kSynchronous) return false;
  uncommitted_.push_back({Change::Kind::kRemoved, inode, parent, name, 0, {}});
  return true;
}

bool NamespaceJournal::creates(uint64_t inode) const {
  return std::any_of(uncommitted_.begin(), uncommitted_.end(), [&](const Change& change) {
    return change.kind == Change::Kind::kCreated && change.inode == inode;
  });
}

std::vector<NamespaceJournal::Change> NamespaceJournal::commit(const SyncScope& scope) {
  if (durability_ != Durability::kLogTree) return commit_all();
  // The inodes whose every change is logged: the synced one, its ancestors (a
  // new directory on the path must exist for the name to be reachable, as
  // btrfs logs new ancestors), and for a directory each inode with an entry
  // change in it. Logging all of an inode's changes keeps the ones left
  // undoable newest first: none depends on a later one that stays.
  std::unordered_set<uint64_t> logged(scope.ancestors.begin(), scope.ancestors.end());
  logged.insert(scope.inode);
  if (scope.directory) {
    // A rename out of the directory into another: btrfs marks the directory
    // (btrfs_record_unlink_dir) and its fsync commits the whole transaction.
    // Logging the moved inode alone could leave an undo that moves a directory
    // below itself.
    for (const Change& change : uncommitted_) {
      if (change.kind == Change::Kind::kRenamed && change.from_parent == scope.inode &&
          change.parent != scope.inode) {
        return commit_all();
      }
    }
    for (const Change& change : uncommitted_) {
      if (change.parent == scope.inode ||
          (change.kind == Change::Kind::kRenamed && change.from_parent == scope.inode)) {
        logged.insert(change.inode);
      }
    }
  }
  // A logged name replaces the entry removed there (btrfs replays the new
  // name over it): that removal is logged too.
  for (const Change& change : uncommitted_) {
    if (change.kind != Change::Kind::kRemoved) continue;
    for (const Change& other : uncommitted_) {
      if (other.kind != Change::Kind::kRemoved && logged.contains(other.inode) &&
          other.parent == change.parent && other.name == change.name) {
        logged.insert(change.inode);
        break;
      }
    }
  }
  std::vector<Change> committed, kept;
  for (Change& change : uncommitted_) {
    (logged.contains(change.inode) ? committed : kept).push_back(std::move(change));
  }
  uncommitted_ = std::move(kept);
  return committed;
}

std::vector<NamespaceJournal::Change> NamespaceJournal::commit_all() {
  std::vector<Change> committed = std::move(uncommitted_);
  uncommitted_.clear();
  return committed;
}

std::vector<NamespaceJournal::Change> NamespaceJournal::lose() {
  std::vector<Change> lost = std::move(uncommitted_);
  uncommitted_.clear();
  std::reverse(lost.begin(), lost.end());
  return lost;
}

}  // namespace mimicfs
