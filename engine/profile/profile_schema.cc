// SPDX-License-Identifier: Apache-2.0
#include "engine/profile/profile_schema.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/base/edit_distance.h"

namespace mimicfs {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kMaxBytes = uint64_t{1} << 60;
// An hour: long enough for any emulated latency, short enough that sums of
// millions of them cannot overflow 64-bit nanoseconds.
constexpr uint64_t kMaxNs = uint64_t{3600} * 1'000'000'000;

constexpr std::string_view kPlacements[] = {"goal", "shared_cursor"};
constexpr std::string_view kGeometries[] = {"groups", "mkfs.xfs", "mkfs.ext4", "mkfs.btrfs"};
constexpr std::string_view kMetadataDurabilities[] = {"journal", "log_tree", "synchronous"};
constexpr std::string_view kTruncateWritebacks[] = {"never", "to_zero", "down"};
constexpr std::string_view kNonEmptyTargetErrors[] = {"ENOTEMPTY", "EEXIST"};
constexpr std::string_view kLocalLocks[] = {"none", "flock", "posix", "all"};
constexpr std::string_view kTimeoutModes[] = {"hard", "soft", "softerr"};
constexpr FallocateModeName kModeNames[] = {
    {FallocateMode::kAllocate, "allocate"},
    {FallocateMode::kKeepSize, "keep_size"},
    {FallocateMode::kPunchHole, "punch_hole"},
    {FallocateMode::kZeroRange, "zero_range"},
};

ProfileKey bytes(std::string_view path, uint64_t Profile::*field, uint64_t min, uint64_t max,
                 std::string_view help) {
  return {path, field, "bytes", help, false, min, max};
}
ProfileKey nanoseconds(std::string_view path, uint64_t Profile::*field, std::string_view help) {
  return {path, field, "ns", help, false, 0, kMaxNs};
}
ProfileKey flag(std::string_view path, bool Profile::*field, std::string_view help) {
  return {path, field, "bool", help};
}

// As TOML writes a string: a literal 'string' when it can be, else a "basic" one.
std::string quoted(std::string_view text) {
  const bool literal = std::none_of(text.begin(), text.end(), [](char c) {
    return c == '\'' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (literal) return "'" + std::string(text) + "'";
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// 4096 -> "4 KiB", 1 << 20 -> "1 MiB"; other values as they are.
std::string readable_bytes(uint64_t value) {
  static constexpr std::pair<uint64_t, std::string_view> kUnits[] = {
      {uint64_t{1} << 40, "TiB"}, {uint64_t{1} << 30, "GiB"}, {kMiB, "MiB"}, {kKiB, "KiB"}};
  for (const auto& [size, name] : kUnits) {
    if (value >= size && value % size == 0) return fmt::format("{} {}", value / size, name);
  }
  return std::to_string(value);
}

}  // namespace

const std::vector<ProfileKey>& profile_keys() {
  static const std::vector<ProfileKey> keys = {
      {"name", &Profile::name, "",
       "shown in stats and the mount's fsname (`mimicfs-NAME`); "
       "defaults to the file's stem when `base` is used",
       true},
      {"description", &Profile::description, "", "one line for `mimicfs profiles`"},
      {"device.allocation_unit", &Profile::allocation_unit, "bytes",
       "the block: a write allocates exactly the units it touches that have none", true, 512, kMiB,
       true},
      {"device.capacity_bytes", &Profile::capacity_bytes, "bytes",
       "emulated device size, a multiple of the unit; a write that needs more gets ENOSPC and "
       "changes nothing",
       true, 1, kMaxBytes},
      {"device.geometry", &Profile::geometry, "",
       "where the groups and the filesystem's own structures are. `groups`: as the next two "
       "keys say. `mkfs.xfs`, `mkfs.ext4`, `mkfs.btrfs`: derived from the capacity as the real "
       "mkfs (and, for btrfs, the kernel's chunk allocator) does (allocation groups, log, "
       "per-AG reservations; block groups, superblock backups, flex_bg bitmaps and inode "
       "tables, journal; mkfs's system and metadata chunks, then data chunks of 10% of the "
       "device up to 1 GiB), and the next two keys stay 0",
       false, 0, 0, false, kGeometries, "geometry"},
      bytes("device.allocation_group_bytes", &Profile::allocation_group_bytes, 0, kMaxBytes,
            "ext4's flex group, xfs's allocation group, btrfs's data block group, a multiple of "
            "the unit; at most 2^20 groups. 0: one group. A new directory goes to the next "
            "group, a file to its directory's"),
      bytes("device.group_metadata_bytes", &Profile::group_metadata_bytes, 0, kMaxBytes,
            "blocks at the start of every group that are never free (bitmaps, inode tables, AG "
            "headers), a multiple of the unit: a file that crosses a group is split there"),
      bytes("device.max_extent_bytes", &Profile::max_extent_bytes, 0, kMaxBytes,
            "the longest extent record, a multiple of the unit; longer runs are several records "
            "(ext4: 32768 blocks). 0: no limit"),
      bytes("device.max_unwritten_extent_bytes", &Profile::max_unwritten_extent_bytes, 0, kMaxBytes,
            "the longest unwritten record (ext4: 32767 blocks); fallocate allocates one such "
            "record per step, as ext4_alloc_file_blocks does. 0: as `device.max_extent_bytes`"),
      {"device.logical_block_size", &Profile::logical_block_size, "bytes",
       "O_DIRECT offsets and lengths must be multiples of it, else EINVAL (the kernel does not "
       "check for FUSE); at most the unit. nfs: 1, the NFS client has no constraint",
       false, 1, kMiB, true},
      {"device.atomic_write_bytes", &Profile::atomic_write_bytes, "bytes",
       "what the device writes whole when the power goes: a crash rule's writeback= persists "
       "unsynced data in these units, so a page larger than it can tear (a 512-byte-sector "
       "disk: 512; an SSD: 4096)",
       false, 1, kMiB, true},
      {"statfs.block_size", &Profile::statfs_block_size, "bytes",
       "`f_bsize` (glibc's posix_fallocate fallback steps by min(f_bsize, 4096)) and "
       "`st_blksize`",
       true, 1, uint64_t{1} << 30},
      {"statfs.fragment_size", &Profile::statfs_fragment_size, "bytes",
       "`f_frsize`; `f_blocks` (the capacity less group metadata), `f_bfree` and `f_bavail` "
       "(free less what delayed allocation has reserved, plus what background reclaim will "
       "free) count these",
       true, 1, uint64_t{1} << 30},
      {"statfs.name_max", &Profile::name_max, "bytes", "`f_namelen`; longer names get ENAMETOOLONG",
       true, 1, 255},
      flag("namespace.tmpfile", &Profile::tmpfile,
           "open(2) with O_TMPFILE makes a file with no name that linkat can name (ext4, xfs, "
           "btrfs); false: EOPNOTSUPP, as from the Linux NFS client, which has no ->tmpfile"),
      flag("namespace.directory_link_count", &Profile::directory_link_count,
           "a directory's `st_nlink` is 2 plus its subdirectories (ext4, xfs, tmpfs); false: "
           "always 1, as btrfs reports it"),
      flag("namespace.truncate_same_size_updates_times", &Profile::truncate_same_size_updates_times,
           "a truncate(2) to the file's own size updates its mtime (ext4_setattr); false: only "
           "a change of size does (xfs, btrfs, tmpfs, an NFS client, which sends none)"),
      flag("namespace.truncate_empty_shortcut", &Profile::truncate_empty_shortcut,
           "a truncate(2) to 0 of an empty file that holds no blocks changes nothing, not even "
           "its set-ID bits (xfs_setattr_size)"),
      flag("namespace.exchange_touches_moved_directory",
           &Profile::exchange_touches_moved_directory,
           "a RENAME_EXCHANGE that moves a directory to another parent updates that "
           "directory's mtime, as xfs_cross_rename's rewrite of its `..` does; false: "
           "untouched (ext4, btrfs, tmpfs)"),
      flag("namespace.trusted_xattrs_listed_to_all", &Profile::trusted_xattrs_listed_to_all,
           "listxattr shows `trusted.*` names to every caller, as btrfs_listxattr does; false: "
           "to CAP_SYS_ADMIN alone (ext4, xfs, tmpfs)"),
      {"namespace.rename_onto_nonempty", &Profile::rename_onto_nonempty, "",
       "the error of a rename onto a directory that is not empty (POSIX allows either): "
       "`ENOTEMPTY` (ext4, btrfs, tmpfs) or `EEXIST` (xfs_rename)",
       false, 0, 0, false, kNonEmptyTargetErrors, "error"},
      flag("client.nfs", &Profile::nfs,
           "the mount is an NFS client of the emulated server: `mount --client-of` mounts "
           "more clients of the same server, each with its own open files; a file one "
           "client removes while another has it open is stale there (ESTALE). false: a "
           "local filesystem, one mount"),
      flag("client.silly_rename", &Profile::silly_rename,
           "the NFS client's silly rename (nfs_sillyrename): unlink of a file open on this "
           "mount, or a rename onto it, renames it to `.nfs` + its file id + a counter in the "
           "same directory, removed at its last close; unlink of that name while open gets "
           "EBUSY, rmdir of its directory ENOTEMPTY. false: removed at once, as a local "
           "filesystem does"),
      nanoseconds("client.acregmin_ns", &Profile::acregmin_ns,
                  "an NFS client's attribute cache of a file, after another client changed it: "
                  "a stat may show the old size and times for this long (emulated time) after "
                  "the client last asked the server; doubled while the file stays the same"),
      nanoseconds("client.acregmax_ns", &Profile::acregmax_ns,
                  "the longest a file's attributes stay cached (doubling stops here)"),
      nanoseconds("client.acdirmin_ns", &Profile::acdirmin_ns,
                  "as client.acregmin_ns, for a directory"),
      nanoseconds("client.acdirmax_ns", &Profile::acdirmax_ns,
                  "as client.acregmax_ns, for a directory"),
      flag("client.noac", &Profile::noac,
           "no attribute cache (nfs(5) noac): every stat asks the server, so another "
           "client's change shows at once; the ac* keys are ignored"),
      {"client.local_lock", &Profile::local_lock, "",
       "which locks the server holds (nfs(5) local_lock): `none` sends fcntl and flock "
       "locks to the server, where they conflict across clients, and flock() becomes a "
       "whole-file fcntl lock (nfs_flock), so the two kinds conflict with each other and "
       "flock(LOCK_EX) needs a descriptor open for writing; `flock` or `posix` keeps that "
       "kind on the client (no conflict with other clients; flock apart from fcntl); `all` "
       "keeps both. Taking any lock revalidates the file's cached pages and attributes",
       false, 0, 0, false, kLocalLocks, "mode"},
      {"client.timeout_mode", &Profile::timeout_mode, "",
       "what a request does while the server does not answer (`ctl server down`), as "
       "nfs(5) says: `hard` waits until it answers; `soft` fails with EIO after the major "
       "timeout, client.timeo_ns x (client.retrans + 1) of emulated time; `softerr` with "
       "ETIMEDOUT",
       false, 0, 0, false, kTimeoutModes, "mode"},
      {"client.timeo_ns", &Profile::timeo_ns, "ns",
       "the RPC timeout before the first retransmission (nfs(5) timeo, 60 s over TCP); "
       "each retransmission waits one more",
       false, 1, kMaxNs},
      {"client.retrans", &Profile::retrans, "",
       "retransmissions before a major timeout (nfs(5) retrans): a soft mount fails then, "
       "a hard one says \"not responding, still trying\"",
       false, 0, 100},
      flag("client.recover_lost_locks", &Profile::recover_lost_locks,
           "a lock the client did not reclaim in the server's grace period (`ctl server "
           "restart`) is asked for again, and kept if nobody took it meanwhile (the nfs "
           "module's recover_lost_locks). false, Linux's default: it is lost, and reads and "
           "writes through the descriptor that held it get EIO"),
      {"server.lease_ns", &Profile::lease_ns, "ns",
       "the NFSv4 server's lease (nfsd's nfsv4leasetime): a client renews it every two "
       "thirds of it, so after a restart it learns of it within that time at the latest",
       false, 1, kMaxNs},
      {"server.grace_ns", &Profile::grace_ns, "ns",
       "the grace period after a server restart (nfsd's nfsv4gracetime; `ctl server "
       "restart --grace` overrides it): clients reclaim their locks, and an open, a lock, "
       "an unlink, an rmdir or a rename waits until it ends (NFS4ERR_GRACE, retried)",
       false, 0, kMaxNs},
      {"fallocate.modes", FallocateModesField{}, "list",
       "which fallocate calls exist: `allocate` (mode 0), `keep_size`, `punch_hole` "
       "(PUNCH_HOLE\\|KEEP_SIZE), `zero_range` (with or without KEEP_SIZE); the rest get "
       "EOPNOTSUPP on every call. Allocated ranges are unwritten extents: they read as zeros, "
       "are converted in place when written, and are counted",
       true},
      {"allocation.placement", &Profile::placement, "",
       "where new blocks go. `goal`: right after the file's previous block (else where the "
       "group's last allocation ended). `shared_cursor`: where the group's last allocation "
       "ended, whatever file it was for, so concurrent writers interleave",
       true, 0, 0, false, kPlacements, "placement"},
      flag("allocation.delayed_allocation", &Profile::delayed_allocation,
           "written blocks get device blocks only at writeback (fsync, an O_SYNC write's range, "
           "the close of a writer, the dirty limit); until then they are in `st_blocks` and "
           "`delayed_bytes` and reserved against free space (ENOSPC comes at write time)"),
      bytes("allocation.writeback_bytes", &Profile::writeback_bytes, 0, kMaxBytes,
            "a file's delayed data that triggers its allocation, as background writeback "
            "would. 0: only fsync and close"),
      bytes("allocation.inode_window_max_bytes", &Profile::inode_window_max_bytes, 0, kMaxBytes,
            "ext4 mballoc's per-inode preallocation: a file appended as a stream is given "
            "windows that double from the request up to this; the unused rest is reserved for "
            "that file and given back on last close, truncate, punch, or when the file "
            "allocates anywhere but the window's next block (the stream ended). 0: off"),
      flag("allocation.speculative_preallocation", &Profile::speculative_preallocation,
           "xfs: an allocation that extends a file also maps blocks past EOF up to the next "
           "power of two of its size (the file doubles), visible in `st_blocks`. Trimmed at the "
           "last close of a writer, but only the first time (as xfs since Linux 6.12) until the "
           "file is truncated, and never for a file that was fallocated. Cannot be combined "
           "with inode windows"),
      bytes("allocation.speculative_preallocation_min_bytes",
            &Profile::speculative_preallocation_min_bytes, 1, kMaxBytes,
            "files smaller than this get none (xfs's `allocsize` default)"),
      bytes("allocation.speculative_preallocation_max_bytes",
            &Profile::speculative_preallocation_max_bytes, 1, kMaxBytes,
            "the most one preallocation adds"),
      flag("allocation.copy_on_write", &Profile::copy_on_write,
           "btrfs: overwriting written blocks allocates new ones (unwritten, fallocated ones "
           "are written in place); a data extent stays allocated as a bookend until no part of "
           "it is referenced (`device.unreferenced_bytes`)"),
      bytes("allocation.cow_extent_max_bytes", &Profile::cow_extent_max_bytes, 0, kMaxBytes,
            "the longest copy-on-write data extent (BTRFS_MAX_EXTENT_SIZE)"),
      flag("allocation.group_trylock", &Profile::group_trylock,
           "writers that start together begin their files in different allocation groups, as "
           "xfs's first pass over the groups passes over one whose free-space header (AGF) "
           "another writer's allocation holds: a file's first allocation, right after another "
           "open file's first allocation in the same group, goes to the next group, and the "
           "file grows there (group_locks.h)"),
      flag("allocation.background_reclaim", &Profile::background_reclaim,
           "the blocks of a file's last unlink (or of its last close, when unlinked while "
           "open) are freed by a background task, as xfs's inode inactivation workers do since "
           "Linux 5.15: the unlink costs only itself, the task costs `cost.unlink_extent_ns` "
           "per extent and `cost.unlink_mib_ns` per MiB and frees the space when the emulated "
           "clock reaches its end (`deferred` in stats.json; `ctl settle` finishes every task "
           "now). statfs counts that space as free, and an allocation that finds no space "
           "waits for every task, charged the wait, and is retried (xfs_inodegc_flush)"),
      flag("allocation.extents_cross_groups", &Profile::extents_cross_groups,
           "false: no extent crosses a group's end (a btrfs extent lives in one block group): "
           "each extent of a request, at most `allocation.cow_extent_max_bytes`, goes whole to "
           "the first group from the goal whose free space holds it (btrfs's find_free_extent "
           "moves on to a new chunk when the current one's tail is too short), and is split "
           "only when no group near can"),
      nanoseconds("cost.round_trip_ns", &Profile::round_trip_ns,
                  "added to every request that reaches an NFS server, and to each round of a "
                  "device batch"),
      nanoseconds("cost.metadata_ns", &Profile::metadata_ns,
                  "create, mkdir, symlink, link, rename, setattr, truncate, setxattr, "
                  "removexattr"),
      nanoseconds("cost.read_ns", &Profile::read_ns, "each device read request"),
      nanoseconds("cost.write_ns", &Profile::write_ns, "each device write request"),
      nanoseconds("cost.fsync_ns", &Profile::fsync_ns,
                  "the commit of fsync/fdatasync (journal and cache flush; NFS COMMIT), charged "
                  "when something was not durable"),
      nanoseconds("cost.flush_ns", &Profile::flush_ns,
                  "an fdatasync or O_DSYNC write that found only overwrites in place to make "
                  "durable: the device's cache flush, no journal commit (ext4's i_datasync_tid, "
                  "xfs's ili_datasync_seq; never on btrfs, whose overwrites are new blocks). 0: as "
                  "`cost.fsync_ns`"),
      nanoseconds("cost.fallocate_ns", &Profile::fallocate_ns,
                  "each fallocate that allocates or zeroes"),
      nanoseconds("cost.punch_ns", &Profile::punch_ns, "each hole punch"),
      nanoseconds("cost.unlink_ns", &Profile::unlink_ns, "each unlink and rmdir"),
      nanoseconds("cost.unlink_extent_ns", &Profile::unlink_extent_ns,
                  "each extent record a file's last unlink frees (seed 004)"),
      nanoseconds("cost.unlink_mib_ns", &Profile::unlink_mib_ns,
                  "each MiB of blocks a file's last unlink frees: bitmap or free-space tree "
                  "updates (seed 004)"),
      nanoseconds("cost.extent_ns", &Profile::extent_ns,
                  "each extent past the first that a device request spans"),
      nanoseconds("cost.gap_fill_ns", &Profile::gap_fill_ns,
                  "each allocation into a hole with allocated blocks on both sides (seed 000's "
                  "\"unsparsing\")"),
      {"cost.bandwidth_bytes_per_second", &Profile::bandwidth_bytes_per_second, "bytes/s",
       "device or network transfer; 0: unlimited", false, 0, kMaxBytes},
      bytes("cost.max_request_bytes", &Profile::max_request_bytes, 512, uint64_t{1} << 30,
            "the longest device request (NFS wsize/rsize, max_sectors_kb)"),
      {"cost.queue_depth", &Profile::queue_depth, "requests",
       "requests in flight: a batch of N costs ceil(N/depth) latencies; in real latency mode, "
       "the device slots",
       false, 1, 65536},
      {"page_cache.memory_bandwidth_bytes_per_second", &Profile::memory_bandwidth_bytes_per_second,
       "bytes/s", "buffered copies; 0: free", false, 0, kMaxBytes},
      nanoseconds("page_cache.syscall_ns", &Profile::syscall_ns, "each buffered read or write"),
      {"page_cache.dirty_unit", &Profile::dirty_unit, "bytes",
       "what writeback writes whole: a page; 1 on NFS, whose client writes each dirty byte "
       "range",
       false, 1, kMiB, true},
      bytes("page_cache.dirty_limit_bytes", &Profile::dirty_limit_bytes, 0, kMaxBytes,
            "dirty data in the volume past which a writer writes its file back; 0: no limit"),
      flag("page_cache.flush_on_close", &Profile::flush_on_close,
           "NFS close-to-open: the close of a writer writes back and commits"),
      flag("page_cache.direct_io", &Profile::direct_io, "false: an O_DIRECT open gets EINVAL"),
      nanoseconds("page_cache.writeback_interval_ns", &Profile::writeback_interval_ns,
                  "how often the flusher wakes, in emulated time (vm.dirty_writeback_centisecs): "
                  "it writes back every file dirty for longer than `page_cache.dirty_expire_ns`, "
                  "in the background (no operation is charged). 0: no flusher"),
      nanoseconds("page_cache.dirty_expire_ns", &Profile::dirty_expire_ns,
                  "how long a file stays dirty before the flusher writes it back whole "
                  "(vm.dirty_expire_centisecs), counted from its first dirty page since it was "
                  "last clean; 0: every file dirtied before the wake"),
      flag("page_cache.write_back_on_replace", &Profile::write_back_on_replace,
           "a rename of a regular file over an existing entry (not a directory; not "
           "RENAME_EXCHANGE or RENAME_NOREPLACE) writes the source back, and its data is "
           "durable with the rename (ext4's auto_da_alloc, btrfs); not charged to the "
           "rename"),
      {"page_cache.write_back_on_close_after_truncate", &Profile::write_back_on_close_after_truncate,
       "",
       "which truncate makes the file's next close write it back, so that \"truncate, rewrite, "
       "close\" without fsync does not leave an empty file once the truncate commits: "
       "to_zero (ext4's auto_da_alloc, btrfs), down, to the size or below (xfs's "
       "XFS_ITRUNCATED), or never; not charged to the close",
       false, 0, 0, false, kTruncateWritebacks},
      {"durability.metadata", &Profile::metadata_durability, "",
       "what a sync makes durable besides the file's data: every namespace change (journal: "
       "ext4, xfs), the synced inode's names and a directory's entries (log_tree: btrfs), or "
       "nothing is pending: namespace and attribute changes are committed at once (synchronous: "
       "an NFS server)",
       false, 0, 0, false, kMetadataDurabilities},
      nanoseconds("durability.commit_interval_ns", &Profile::commit_interval_ns,
                  "how often the filesystem commits on its own, in emulated time (ext4's "
                  "commit=5, xfs's log worker and btrfs's commit=30, every 30 s; the NFS "
                  "client's COMMIT after the flusher's writes): every pending namespace change "
                  "and every file with no dirty data in the page cache (its data written back, "
                  "its size, allocation, truncates and punches) become durable, as a sync would "
                  "make them; a file with dirty data commits all but its dirty pages, at the "
                  "size its writeback or a truncate reached. 0: only syncs commit"),
  };
  return keys;
}

const ProfileKey* find_profile_key(std::string_view path) {
  for (const ProfileKey& key : profile_keys()) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

std::string profile_key_suggestion(std::string_view path) {
  constexpr size_t kMaxSuggestions = 3;
  std::vector<std::pair<size_t, std::string_view>> near;
  for (const ProfileKey& key : profile_keys()) {
    const size_t distance = edit_distance(path, key.path);
    if (distance <= std::max<size_t>(3, path.size() / 4)) near.emplace_back(distance, key.path);
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (near.empty()) {
    // Nothing close: the keys of the same section, if it is one.
    const std::string_view section = path.substr(0, path.find('.') + 1);
    for (const ProfileKey& key : profile_keys()) {
      if (section.size() > 1 && key.path.starts_with(section)) near.emplace_back(0, key.path);
    }
  }
  if (near.size() > kMaxSuggestions) near.resize(kMaxSuggestions);
  std::string names;
  for (size_t i = 0; i < near.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + std::string(near[i].second);
  }
  const std::string all = "`mimicfs profiles keys` lists every key";
  return names.empty() ? all : "did you mean " + names + "? " + all;
}

std::span<const FallocateModeName> fallocate_mode_names() { return kModeNames; }

std::string value_as_toml(const ProfileKey& key, const Profile& profile) {
  struct Visitor {
    const Profile& p;
    std::string operator()(std::string Profile::*f) const { return quoted(p.*f); }
    std::string operator()(bool Profile::*f) const { return p.*f ? "true" : "false"; }
    std::string operator()(uint64_t Profile::*f) const { return std::to_string(p.*f); }
    std::string operator()(uint32_t Profile::*f) const { return std::to_string(p.*f); }
    std::string operator()(FallocateModesField) const {
      std::string modes;
      for (const auto& m : kModeNames) {
        if (p.supports(m.mode)) modes += (modes.empty() ? "" : ", ") + quoted(m.name);
      }
      return "[" + modes + "]";
    }
  };
  return std::visit(Visitor{profile}, key.field);
}

std::string describe_constraints(const ProfileKey& key) {
  std::string text(key.unit);
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (!key.choices.empty()) {
    std::string choices;
    for (size_t i = 0; i < key.choices.size(); ++i) {
      choices += (i == 0                        ? ""
                  : i + 1 == key.choices.size() ? " or "
                                                : ", ") +
                 fmt::format("`{}`", key.choices[i]);
    }
    add(choices);
  }
  if (key.power_of_two) add("power of two");
  const bool integer = std::holds_alternative<uint64_t Profile::*>(key.field) ||
                       std::holds_alternative<uint32_t Profile::*>(key.field);
  if (integer && (key.min > 1 || (key.max != kMaxBytes && key.max != kMaxNs))) {
    const bool in_bytes = key.unit == "bytes";
    add(fmt::format("{}..{}", in_bytes ? readable_bytes(key.min) : std::to_string(key.min),
                    in_bytes ? readable_bytes(key.max) : std::to_string(key.max)));
  }
  if (!key.required) {
    std::string value = value_as_toml(key, Profile{});
    if (key.unit == "bytes" && integer) value = readable_bytes(std::stoull(value));
    text += (text.empty() ? "optional, " : "; optional, ") + value;
  }
  return text;
}

std::string profile_keys_markdown() {
  std::string table = "| key | unit | meaning |\n|---|---|---|\n";
  table += "| `base` |  | built-in profile to start from (files only) |\n";
  for (const ProfileKey& key : profile_keys()) {
    table += fmt::format("| `{}` | {} | {} |\n", key.path, describe_constraints(key), key.help);
  }
  return table;
}

}  // namespace mimicfs
