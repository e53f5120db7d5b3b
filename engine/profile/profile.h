// SPDX-License-Identifier: Apache-2.0
// Profile: every knob of one emulated storage backend, as plain data.
//
// Profiles are TOML (docs/profiles.md documents each key and its unit). The
// built-in ones are the files in engine/profile/profiles/, compiled in verbatim, so a
// built-in and a user's file go through the same parser and validation.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace mimicfs {

// The fallocate(2) calls a backend can answer, by what the caller asks for.
enum class FallocateMode : uint8_t {
  kAllocate = 1 << 0,   // mode 0: allocate and extend the size
  kKeepSize = 1 << 1,   // FALLOC_FL_KEEP_SIZE: allocate beyond EOF, size unchanged
  kPunchHole = 1 << 2,  // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
  kZeroRange = 1 << 3,  // FALLOC_FL_ZERO_RANGE, with or without KEEP_SIZE
};

struct Profile {
  std::string name;
  std::string description;

  // [device]: the emulated device or server filesystem.
  uint64_t allocation_unit = 4096;          // bytes; the unit a write allocates
  uint64_t capacity_bytes = 0;              // a multiple of allocation_unit
  std::string geometry = "groups";          // "groups" or "mkfs.{xfs,ext4,btrfs}" (mkfs_geometry.h)
  uint64_t allocation_group_bytes = 0;      // bytes; 0: the device is one group
  uint64_t group_metadata_bytes = 0;        // bytes at the start of each group, never free
  uint64_t max_extent_bytes = 0;            // bytes; the longest extent record, 0: no limit
  uint64_t max_unwritten_extent_bytes = 0;  // bytes; the longest unwritten one, 0: as written
  uint64_t logical_block_size = 512;        // bytes; O_DIRECT offsets and lengths align to it
  uint64_t atomic_write_bytes = 4096;       // bytes the device writes whole at a power cut

  // [statfs]: the geometry statfs(2) reports.
  uint64_t statfs_block_size = 4096;     // f_bsize; glibc's posix_fallocate steps by it (max 4096)
  uint64_t statfs_fragment_size = 4096;  // f_frsize; f_blocks and f_bfree count these
  uint32_t name_max = 255;               // f_namelen

  // [fallocate]: a bit per FallocateMode the backend supports; the rest get EOPNOTSUPP.
  uint8_t fallocate_modes = 0;

  // [allocation]: how blocks are chosen (placement_policy.h, preallocation_policy.h).
  std::string placement = "goal";       // "goal" or "shared_cursor"
  bool delayed_allocation = false;      // allocate at fsync, close or writeback, not at write
  uint64_t writeback_bytes = 0;         // a file's delayed bytes that trigger writeback; 0: never
  uint64_t inode_window_max_bytes = 0;  // ext4 per-inode preallocation windows; 0: off
  bool speculative_preallocation = false;  // xfs speculative EOF preallocation
  uint64_t speculative_preallocation_min_bytes = 65536;
  uint64_t speculative_preallocation_max_bytes = uint64_t{8} << 30;
  bool copy_on_write = false;  // btrfs: overwrites allocate new blocks, bookend extents
  uint64_t cow_extent_max_bytes = uint64_t{128} << 20;  // the longest copy-on-write data extent
  bool background_reclaim = false;  // an unlinked file's blocks are freed later, in background
  bool extents_cross_groups = true;  // false: an extent lives in one group (btrfs block groups)
  bool group_trylock = false;  // writers starting together begin in different groups (xfs's AGF trylock)

  // [cost]: emulated time (cost_model.h). 0 everywhere: operations are free.
  uint64_t round_trip_ns = 0;     // network round trip of every request to an NFS server
  uint64_t metadata_ns = 0;       // create, mkdir, rename, link, setattr, xattrs, rmdir
  uint64_t read_ns = 0;           // each device read request
  uint64_t write_ns = 0;          // each device write request
  uint64_t fsync_ns = 0;          // the commit of fsync/fdatasync: journal and cache flush
  uint64_t flush_ns = 0;          // a sync of overwrites in place: the cache flush; 0: fsync_ns
  uint64_t fallocate_ns = 0;      // each fallocate that allocates or zeroes
  uint64_t punch_ns = 0;          // each hole punch
  uint64_t unlink_ns = 0;         // each unlink, and each rmdir
  uint64_t unlink_extent_ns = 0;  // each extent the last unlink of a file frees
  uint64_t unlink_mib_ns = 0;     // each MiB of blocks the last unlink of a file frees
  uint64_t extent_ns = 0;         // each extent past the first a device request spans
  uint64_t gap_fill_ns = 0;       // each allocation into a hole between allocated blocks
  uint64_t bandwidth_bytes_per_second = 0;  // device or network; 0: unlimited
  uint64_t max_request_bytes = 1 << 20;     // longest device request (NFS wsize/rsize)
  uint64_t queue_depth = 1;                 // device requests in flight at once

  // [page_cache]: the host's page cache in front of the device.
  uint64_t memory_bandwidth_bytes_per_second = 0;  // buffered copies; 0: free
  uint64_t syscall_ns = 0;                         // each buffered read or write
  uint64_t dirty_unit = 4096;      // bytes writeback writes whole: a page; 1 on NFS (byte ranges)
  uint64_t dirty_limit_bytes = 0;  // dirty bytes that make a writer write back; 0: no limit
  bool flush_on_close = false;     // NFS close-to-open: close writes back and commits
  bool direct_io = true;           // O_DIRECT opens are accepted (else EINVAL)
  // The flusher (emulated time): every writeback_interval_ns it writes back the
  // files dirty for longer than dirty_expire_ns (dirty_writeback_centisecs,
  // dirty_expire_centisecs). An interval of 0: no flusher; an expiry of 0:
  // every file dirtied before the wake.
  uint64_t writeback_interval_ns = 0;
  uint64_t dirty_expire_ns = 0;
  // ext4's auto_da_alloc, btrfs: a rename over a regular file writes the source back.
  bool write_back_on_replace = false;
  // Which truncate makes the next close write the file back: "to_zero" (ext4's
  // auto_da_alloc, btrfs), "down" (to the size or below: xfs) or "never".
  std::string write_back_on_close_after_truncate = "never";

  // [durability]: what survives `ctl crash`.
  // What a sync makes durable besides the file's own data (NamespaceJournal):
  // "journal" (ext4, xfs): any commit makes every namespace change durable;
  // "log_tree" (btrfs): a file's fsync its own names, a directory's the entries
  // in it; "synchronous" (NFS): namespace and attribute changes are durable at
  // once, and a size change or a punch writes back and commits the file first.
  std::string metadata_durability = "journal";
  // Every commit_interval_ns of emulated time the journal commits (jbd2's
  // commit=, xfs's log worker, btrfs's transaction commit, the NFS client's
  // COMMIT after the flusher's writes): pending namespace changes, and every
  // file but its dirty pages, are durable. 0: only syncs commit.
  uint64_t commit_interval_ns = 0;

  // [namespace]
  bool tmpfile = true;  // open(O_TMPFILE) works (else EOPNOTSUPP: the NFS client)
  bool directory_link_count = true;  // st_nlink 2 + subdirectories (else 1: btrfs)
  bool truncate_same_size_updates_times = false;  // ext4
  bool truncate_empty_shortcut = false;           // xfs
  bool exchange_touches_moved_directory = false;  // xfs
  bool trusted_xattrs_listed_to_all = false;      // btrfs
  std::string rename_onto_nonempty = "ENOTEMPTY";  // or "EEXIST" (xfs)

  // [client]: what the NFS client does on its own (NfsClientLayer, docs/nfs.md).
  bool nfs = false;           // each mount is a client of the emulated server (--client-of)
  bool silly_rename = false;  // unlink or rename over a file open here renames it to .nfsXXXX
  // The attribute cache's bounds (nfs(5) acregmin...; nfs_update_inode), in
  // emulated time, and noac: no attribute cache at all.
  uint64_t acregmin_ns = 3'000'000'000;
  uint64_t acregmax_ns = 60'000'000'000;
  uint64_t acdirmin_ns = 30'000'000'000;
  uint64_t acdirmax_ns = 60'000'000'000;
  bool noac = false;
  // Which locks stay on this client (nfs(5) local_lock): "none" sends flock
  // and fcntl locks to the server, "flock" or "posix" keeps that kind here,
  // "all" keeps both, as a local filesystem does.
  std::string local_lock = "all";
  // What a request does while the server does not answer (nfs(5) hard, soft,
  // softerr), and the RPC timeouts behind it (timeo, retrans).
  std::string timeout_mode = "hard";
  uint64_t timeo_ns = 60'000'000'000;
  uint32_t retrans = 2;
  // A lock the client could not reclaim after a server restart: lost (EIO
  // through it), or taken again if nobody holds it (nfs.recover_lost_locks).
  bool recover_lost_locks = false;

  // [server]: the emulated NFS server's state (NfsClients, docs/nfs.md):
  // its lease (a silent client's state expires after it; clients renew at
  // two thirds of it) and the grace period after a restart, in which clients
  // reclaim their locks and new OPENs, LOCKs, REMOVEs and RENAMEs wait.
  uint64_t lease_ns = 90'000'000'000;
  uint64_t grace_ns = 90'000'000'000;

  bool supports(FallocateMode mode) const {
    return (fallocate_modes & static_cast<uint8_t>(mode)) != 0;
  }

  // The effective profile as TOML, every key present; parses back to an equal profile.
  std::string to_toml() const;
};

struct BuiltinProfile {
  std::string_view name;
  std::string_view toml;
};

// The compiled-in profiles, sorted by name (generated from engine/profile/profiles/).
const std::vector<BuiltinProfile>& builtin_profiles();

// The profile used when none is named: NFS emulation.
inline constexpr std::string_view kDefaultProfile = "nfs";

// Each loader returns the profile, or a one-line message naming the file, the line
// and the key at fault, e.g. "my.toml:4: device.allocation_unit: must be a power of two".
// A profile may start from another with `base = "NAME"` and override any key.
std::expected<Profile, std::string> parse_profile(std::string_view toml_text,
                                                  std::string_view source_name);
std::expected<Profile, std::string> load_builtin_profile(std::string_view name);
std::expected<Profile, std::string> load_profile_file(const std::string& path);

// Applies `--set KEY=VALUE` overrides in order, with the same validation as a
// file; VALUE is TOML (a bare word is taken as a string). Errors read
// "--set KEY: reason".
std::expected<Profile, std::string> apply_overrides(Profile profile,
                                                    const std::vector<std::string>& assignments);

}  // namespace mimicfs
