// SPDX-License-Identifier: Apache-2.0
// Namespace: what the journal makes durable and what a crash undoes. A
// commit (an fsync's, the periodic one, sync) makes the changes it carries
// durable and lets removed inodes go; a crash undoes what no commit carried
// (NamespaceJournal): created entries go, removed ones come back, renamed
// ones move back.
#include "engine/namespace/namespace.h"

namespace mimicfs {

bool Namespace::commit(uint64_t inode, bool only_its_creation, Work& work) {
  std::vector<NamespaceJournal::Change> committed;
  Settled settled;
  {
    std::lock_guard lock(mutex_);
    if (only_its_creation && !journal_.creates(inode)) return false;
    NamespaceJournal::SyncScope scope{inode, false, {}};
    auto node = find_locked(inode);
    if (node) scope.directory = node->is_directory();
    // The ancestors of its first link's directory, up to the root.
    for (uint64_t depth = 0;
         node && node->number != kRootInode && node->parent != 0 && depth <= inodes_.size();
         ++depth) {
      scope.ancestors.push_back(node->parent);
      node = find_locked(node->parent);
    }
    committed = journal_.commit(scope);
    settled = settle_committed_locked(committed);
  }
  release_settled(settled, work);
  return !committed.empty();
}

bool Namespace::commit_all(Work& work) {
  Settled settled;
  bool committed;
  {
    std::lock_guard lock(mutex_);
    committed = commit_all_locked(settled);
  }
  release_settled(settled, work);
  return committed;
}

bool Namespace::commit_all_locked(Settled& settled) {
  const std::vector<NamespaceJournal::Change> committed = journal_.commit_all();
  settled = settle_committed_locked(committed);
  return !committed.empty();
}

Namespace::Settled Namespace::settle_committed_locked(
    const std::vector<NamespaceJournal::Change>& committed) {
  Settled settled;
  for (const NamespaceJournal::Change& change : committed) {
    if (change.kind != NamespaceJournal::Change::Kind::kRemoved) continue;
    if (auto node = settle_removal_locked(change.inode)) settled.push_back(std::move(node));
  }
  return settled;
}

void Namespace::release_settled(const Settled& settled, Work& work) {
  for (const std::shared_ptr<Inode>& node : settled) {
    std::lock_guard lock(node->mutex);
    hooks_.removal_settled(node, work);
  }
}

void Namespace::note_removal_locked(const std::shared_ptr<Inode>& child, uint64_t parent,
                                    const std::string& name) {
  if (!journal_.removed(child->number, parent, name)) return;
  child->pending_removals.fetch_add(1);
  removed_.emplace(child->number, child);
}

std::shared_ptr<Inode> Namespace::settle_removal_locked(uint64_t inode) {
  auto it = removed_.find(inode);
  if (it == removed_.end()) return nullptr;
  std::shared_ptr<Inode> node = it->second;
  if (node->pending_removals.fetch_sub(1) != 1) return nullptr;
  removed_.erase(it);
  // Its last entry's removal is durable now: what it held may go.
  return node->nlink == 0 ? node : nullptr;
}

std::vector<std::pair<uint64_t, std::string>> Namespace::undo_uncommitted(Work& work) {
  std::vector<std::pair<uint64_t, std::string>> removed;
  const std::vector<NamespaceJournal::Change> lost = journal_.lose();
  for (const NamespaceJournal::Change& change : lost) {
    if (change.kind == NamespaceJournal::Change::Kind::kRemoved) {
      if (restore_entry_locked(change)) removed.emplace_back(change.parent, change.name);
      if (auto settled = settle_removal_locked(change.inode)) release_settled({settled}, work);
      continue;
    }
    auto dir = find_locked(change.parent);
    if (!dir || !dir->is_directory()) continue;
    auto entry = dir->entries.find(change.name);
    if (entry == dir->entries.end() || entry->second->number != change.inode) continue;
    const std::shared_ptr<Inode> inode = entry->second;
    if (change.kind == NamespaceJournal::Change::Kind::kCreated) {
      if (inode->is_directory() && !inode->entries.empty()) continue;
      removed.emplace_back(dir->number, change.name);
      dir->entries.erase(entry);
      if (inode->is_directory()) dir->nlink.fetch_sub(1);
      drop_link_locked(inode, work);
      continue;
    }
    auto from = find_locked(change.from_parent);
    if (!from || !from->is_directory() || from->entries.contains(change.from_name)) continue;
    removed.emplace_back(dir->number, change.name);
    dir->entries.erase(entry);
    from->entries.emplace(change.from_name, inode);
    if (inode->is_directory() && from != dir) {
      dir->nlink.fetch_sub(1);
      from->nlink.fetch_add(1);
    }
    inode->parent = from->number;
    inode->name = change.from_name;
  }
  return removed;
}

bool Namespace::restore_entry_locked(const NamespaceJournal::Change& change) {
  auto kept = removed_.find(change.inode);
  auto dir = find_locked(change.parent);
  // Not when its name is someone else's now, or its directory is gone (an
  // rmdir or a rename over it left it no link, though a reference may keep it).
  if (kept == removed_.end() || !dir || !dir->is_directory() || dir->nlink == 0 ||
      dir->entries.contains(change.name)) {
    return false;
  }
  const std::shared_ptr<Inode>& inode = kept->second;
  dir->entries.emplace(change.name, inode);
  if (inode->is_directory()) {
    inode->nlink = 2;
    dir->nlink.fetch_add(1);
  } else {
    inode->nlink.fetch_add(1);
  }
  inode->parent = dir->number;
  inode->name = change.name;
  inodes_.emplace(inode->number, inode);  // back in the table if it had left
  return true;
}

}  // namespace mimicfs
