// SPDX-License-Identifier: Apache-2.0
// NamespaceJournal: the namespace changes (entries created, linked, renamed,
// removed by unlink, rmdir or a rename over them) that a power cut would undo, and what a sync
// makes durable, by the profile's durability.metadata:
//   journal      ext4, xfs: one journal for the volume. Its commit (any fsync of
//                a file or directory that commits, an O_SYNC/O_DSYNC write)
//                makes every change durable.
//   log_tree     btrfs: fsync writes one inode's changes to the log tree. A
//                file's fsync makes its own names durable and the creation of
//                its ancestors; a directory's fsync also the changes of the
//                entries in it, or everything when an entry was renamed out
//                of it into another directory (a full transaction commit).
//                Other changes wait for their own sync.
//   synchronous  NFS: the server commits each namespace operation before it
//                replies; nothing is ever pending.
// Not thread-safe: the Namespace's mutex guards it.
//
// The changes are indexed by inode, by directory and by the place of each
// removal, so a commit costs what it commits (about O(k) for k changes), not
// what is pending: an fsync stays cheap with 100,000 removals uncommitted.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/profile/profile.h"

namespace mimicfs {

class NamespaceJournal {
 public:
  enum class Durability : uint8_t { kJournal, kLogTree, kSynchronous };

  struct Change {
    enum class Kind : uint8_t { kCreated, kRenamed, kRemoved } kind;
    uint64_t inode = 0;
    uint64_t parent = 0;  // where the entry is now
    std::string name;
    uint64_t from_parent = 0;  // kRenamed: where it was
    std::string from_name;
  };

  // What a sync of one inode asks to make durable.
  struct SyncScope {
    uint64_t inode = 0;
    bool directory = false;           // a directory's fsync: the entries in it too
    std::vector<uint64_t> ancestors;  // its parent, the parent's parent, ... the root
  };

  explicit NamespaceJournal(Durability durability) : durability_(durability) {}
  // The profile's durability.metadata (validated by the profile).
  static Durability durability_of(const Profile& profile);

  // Entry `name` in `parent` now names `inode` (create, mkdir, symlink, mknod, link).
  void created(uint64_t inode, uint64_t parent, const std::string& name);
  // Entry `from_name` in `from_parent` moved to `name` in `parent` (an entry it
  // replaced there is removed() first).
  void renamed(uint64_t inode, uint64_t parent, const std::string& name, uint64_t from_parent,
               const std::string& from_name);
  // Entry `name` in `parent`, which named `inode`, is gone (unlink, rmdir, a
  // rename over it). True when recorded (not on a synchronous server).
  bool removed(uint64_t inode, uint64_t parent, const std::string& name);
  // True when the creation of an entry for `inode` is not durable yet.
  bool creates(uint64_t inode) const;
  // A sync of `scope.inode`: the changes the profile's model makes durable with
  // it (every change, on a journal), oldest first; none: the commit had no work.
  std::vector<Change> commit(const SyncScope& scope);
  // Every change is durable now; returns them, oldest first.
  std::vector<Change> commit_all();
  // A power cut: the changes not durable, newest first; the journal is empty after.
  std::vector<Change> lose();
  // How many changes are not durable yet.
  size_t pending() const { return pending_; }

 private:
  using Sequence = uint64_t;  // the order changes came in
  struct Place {              // an entry: (directory, name)
    uint64_t directory;
    std::string name;
    bool operator==(const Place&) const = default;
  };
  struct PlaceHash {
    size_t operator()(const Place& p) const {
      return std::hash<std::string>()(p.name) ^ (std::hash<uint64_t>()(p.directory) * 31);
    }
  };
  // The index's sequences, less those taken since (an index entry is dropped
  // when its list is next read, so each costs O(1) over its life).
  std::vector<Sequence>& live(std::vector<Sequence>& sequences);
  void add(Change change);
  const Change& at(Sequence sequence) const { return *changes_[sequence - first_]; }
  // Takes one change out of the journal (its index entries go lazily).
  Change take(Sequence sequence);

  const Durability durability_;
  // changes_[i] is sequence first_ + i; a taken one is empty until the ones
  // before it go too.
  Sequence first_ = 0;
  std::deque<std::optional<Change>> changes_;
  size_t pending_ = 0;
  // By inode (never holds a taken change: a commit takes an inode's all), and
  // for a log tree by the directory an entry is in now and the one a rename
  // took it from, and by the place of each removal.
  std::unordered_map<uint64_t, std::vector<Sequence>> by_inode_;
  std::unordered_map<uint64_t, std::vector<Sequence>> by_directory_;
  std::unordered_map<Place, std::vector<Sequence>, PlaceHash> removals_at_;
};

}  // namespace mimicfs
