// NamespaceJournal: the namespace changes (entries created, linked, renamed)
// that a power cut would undo, and when they become durable, by the profile's
// durability.namespace:
//   journal      at the next commit of the one journal (any fsync of a file or
//                directory, an O_SYNC/O_DSYNC write), as ext4, xfs and btrfs;
//   synchronous  at once: an NFS server commits each namespace operation
//                before it replies.
// Not thread-safe: the Namespace's mutex guards it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/profile.h"

namespace mimicfs {

class NamespaceJournal {
 public:
  enum class Durability : uint8_t { kJournal, kSynchronous };

  struct Change {
    enum class Kind : uint8_t { kCreated, kRenamed } kind;
    uint64_t inode = 0;
    uint64_t parent = 0;  // where the entry is now
    std::string name;
    uint64_t from_parent = 0;  // kRenamed: where it was
    std::string from_name;
  };

  explicit NamespaceJournal(Durability durability) : durability_(durability) {}
  // The profile's durability.namespace ("journal" or "synchronous"; validated by the profile).
  static Durability durability_of(const Profile& profile);

  // Entry `name` in `parent` now names `inode` (create, mkdir, symlink, mknod, link).
  void created(uint64_t inode, uint64_t parent, const std::string& name);
  // Entry `from_name` in `from_parent` moved to `name` in `parent`, replacing nothing.
  void renamed(uint64_t inode, uint64_t parent, const std::string& name, uint64_t from_parent,
               const std::string& from_name);
  // True when the creation of an entry for `inode` is not durable yet.
  bool creates(uint64_t inode) const;
  // Every change is durable now; true when there were any (the commit had work).
  bool commit();
  // A power cut: the changes not durable, newest first; the journal is empty after.
  std::vector<Change> lose();

 private:
  const Durability durability_;
  std::vector<Change> uncommitted_;  // oldest first
};

}  // namespace mimicfs
