// SPDX-License-Identifier: Apache-2.0
// Engine: a Volume and its layers, stacked as a mount uses them:
//
//   [NfsClientLayer ->] CountingLayer -> CostLayer -> FaultLayer -> Volume
//
// On profiles with client.nfs the layers below the client are the server, and
// each mount is a client of it (NfsClients): what a client sends is what the
// server sees, counts and charges. fs() is the first client (or the top, on a
// local profile): what the FUSE adapter of the first mount and the engine
// tests call; add_client() makes another. The layers are also reachable by
// name for what only they know (fault rules, the clock).
#pragma once

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>

#include "engine/core/volume.h"
#include "engine/data/data_store.h"
#include "engine/durability/power_cut.h"
#include "engine/layers/cost_layer.h"
#include "engine/layers/counting_layer.h"
#include "engine/layers/fault_layer.h"
#include "engine/nfs/nfs_clients.h"
#include "engine/time/wall_clock.h"

namespace mimicfs {

class Engine {
 public:
  Engine(Profile profile, std::unique_ptr<DataStore> store, const WallClock& clock,
         LatencyMode latency = {})
      : volume_(std::move(profile), std::move(store), clock),
        faults_(volume_),
        cost_(faults_, latency),
        counting_(cost_) {
    faults_.set_clock([this] { return cost_.emulated_ns(); });
    faults_.set_elapsed_clock([this] { return cost_.uptime_ns(); });
    faults_.set_crash_hook([this](const PowerCut& cut) { crash(cut, true); });
    faults_.set_server_restart_hook([this] { restart_server(std::nullopt); });
    if (volume_.profile().nfs) {
      clients_ = std::make_unique<NfsClients>(counting_, [this] { return cost_.elapsed_ns(); });
      clients_->set_server_gate(
          [this](Work& work, bool in_grace) { return faults_.reach_server(work, in_grace); },
          [this] { return cost_.uptime_ns(); },
          [this](Work& work) {
            cost_.charge_wait(work);
            work.fault_latency_ns = 0;
          });
      first_client_ = &clients_->add("");
    }
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  FileSystem& fs() { return first_client_ ? static_cast<FileSystem&>(*first_client_) : counting_; }
  // True where the volume can have several mounts: an NFS server's clients.
  bool has_clients() const { return clients_ != nullptr; }
  // Names the first client (by its mount point, for stats.json).
  void name_first_client(std::string name) {
    if (first_client_) first_client_->set_name(std::move(name));
  }
  // Another client of the server, named by its mount point; has_clients()
  // must be true. It serves until remove_client().
  FileSystem& add_client(std::string name) { return clients_->add(std::move(name)); }
  // A client's mount has gone; not the first one (fs()), which the engine keeps.
  void remove_client(FileSystem& client) {
    if (clients_ && &client != first_client_) {
      clients_->remove(static_cast<const NfsClientLayer&>(client));
    }
  }
  // Tells `client`'s mount of files another client changed while it had
  // their attributes cached (NfsClientLayer::set_change_observer); {} stops.
  // Nothing on a profile without clients.
  void on_changes_elsewhere(FileSystem& client, NfsClientLayer::ChangeObserver observer) {
    if (clients_) static_cast<NfsClientLayer&>(client).set_change_observer(std::move(observer));
  }
  // `client` (fs() or add_client's) as an NFS client, for its locks; null on
  // a profile without clients.
  NfsClientLayer* nfs_client(FileSystem& client) {
    return clients_ ? &static_cast<NfsClientLayer&>(client) : nullptr;
  }
  Volume& volume() { return volume_; }
  FaultInjector& faults() { return faults_.rules(); }
  CostLayer& cost() { return cost_; }
  void power_on() { faults_.power_on(); }
  // An operation through a descriptor from before the last cut: waits for the
  // restart while the volume is frozen (FaultLayer::wait_while_frozen).
  void wait_while_frozen() { faults_.wait_while_frozen(); }
  // FaultLayer::frozen_at and restarts: for requests kept, not waiting, while
  // the volume is frozen (fusefs/frozen_requests.h).
  std::optional<uint64_t> frozen_at() { return faults_.frozen_at(); }
  uint64_t restarts() { return faults_.restarts(); }
  void count_kept(int change) { faults_.count_kept(change); }
  bool powered() const { return faults_.powered(); }
  // An NFS server's outage (`ctl server down`, `server up`): the clients'
  // requests wait or time out (FaultLayer). False on a local profile.
  bool set_server_up(bool up) {
    if (!clients_) return false;
    up ? faults_.server_up() : faults_.server_down();
    return true;
  }
  // `ctl server restart`: the NFS server boots again (ending an outage), with
  // a grace period of `grace_ns` (the profile's server.grace_ns if none) in
  // which the clients reclaim their locks. False on a local profile.
  bool restart_server(std::optional<uint64_t> grace_ns) {
    if (!clients_) return false;
    const uint64_t grace = grace_ns.value_or(volume_.profile().grace_ns);
    clients_->server_restarted(grace);
    faults_.server_restart(grace);
    return true;
  }
  // `ctl crash --client` on the mount of NFS client `client`: its machine
  // crashes and reboots (NfsClients::crash_client), staying down with `hold`
  // until restart_client(). The files it alone had written since their last
  // sync lose that data on the server (Volume::lose_unsynced); its kernel's
  // caches go (`observer`, its mount's, is told), and the other clients'
  // pages of those files are old. False on a local profile.
  bool crash_client(FileSystem& client, bool hold, int observer) {
    if (!clients_) return false;
    auto& crashed = static_cast<NfsClientLayer&>(client);
    const CrashReport report = volume_.lose_unsynced(clients_->crash_client(crashed, hold));
    for (const uint64_t inode : report.restored_files) {
      clients_->changed(inode, crashed, NfsClientLayer::Change::kData);
    }
    const bool later = faults_.frozen() || !faults_.server_is_up();
    tell_crash_observers(report, [&](int id) -> std::optional<bool> {
      if (id != observer) return std::nullopt;
      return later;
    });
    return true;
  }
  // The crashed client is up again; false if it was not held down.
  bool restart_client(FileSystem& client) {
    if (!clients_) return false;
    auto& nfs = static_cast<NfsClientLayer&>(client);
    if (!nfs.down()) return false;
    nfs.restart();
    clients_->client_up(nfs);
    return true;
  }
  // `ctl time advance`: idle time passes; the server's leases and grace
  // periods end in it.
  void advance(uint64_t ns, Work& work) {
    cost_.advance(ns, work);
    if (clients_) clients_->settle();
  }
  // Set once, before any operation: true once the daemon stops, when the
  // operations waiting on a frozen volume give up (FaultLayer::power_off).
  void stop_waiting_when(std::function<bool()> stopping) {
    faults_.stop_waiting_when(std::move(stopping));
  }

  // What is told of each power cut: its report, and whether the kernel's caches
  // may only be told later, from another thread: the cut happened inside an
  // operation (a crash rule), or operations wait on the frozen volume, holding
  // page locks the kernel's invalidation needs.
  using CrashObserver = std::function<void(const CrashReport&, bool later)>;
  // Each mount's adapter invalidates its kernel's caches. Returns the id that
  // removes it; a removal waits for a crash telling observers meanwhile.
  int on_crash(CrashObserver observer) {
    std::lock_guard lock(observers_mutex_);
    crash_observers_.emplace(++last_observer_, std::move(observer));
    return last_observer_;
  }
  void remove_crash_observer(int id) {
    std::unique_lock lock(observers_mutex_);
    assert_held(observers_mutex_);
    while (observers_busy_ > 0) observers_idle_.wait(lock);
    crash_observers_.erase(id);
  }

  // A power cut of the whole stack: `ctl crash` (cause "ctl") or a crash rule.
  // With `hold` the volume stays off (EIO) until power_on(), with `freeze` its
  // operations wait for it (FaultLayer::power_off); with `writeback`
  // part of the unsynced overwrites persist first (torn and reordered writes).
  // `caller`, the observer of the mount whose `ctl crash` this is, may be told
  // at once; every other mount's is told to invalidate later, from its own
  // thread (its session may be ending).
  CrashReport crash(const PowerCut& cut, bool during_operation = false, int caller = 0) {
    // Operations already waiting on a frozen volume, or for a server that is
    // down, hold page and directory locks the kernel's invalidation needs,
    // whatever this cut is.
    const bool frozen = faults_.frozen() || cut.freeze || !faults_.server_is_up();
    // First: nothing reaches the crashed volume before the restart.
    if (cut.hold || cut.freeze) faults_.power_off(cut.freeze);
    const uint64_t written_back =
        cut.writeback > 0 ? counting_.write_back_at_random(cut.writeback, cut.seed) : 0;
    CrashReport report = fs().crash();
    faults_.crashed(cut.cause);
    if (clients_) faults_.end_grace();
    spdlog::warn(
        "power cut: {}{}{}", cut.cause,
        cut.writeback > 0 ? fmt::format("; {} bytes written back first", written_back) : "",
        cut.freeze ? "; the volume stays off, its operations waiting, until `restart`"
        : cut.hold ? "; the volume stays off until `restart`"
                   : "");
    tell_crash_observers(report, [&](int id) -> std::optional<bool> {
      return during_operation || frozen || id != caller;
    });
    return report;
  }

  // The volume, its counters and its emulated time as an image (volume_image.h),
  // synced first, as an unmount does; no operation may run.
  ImageJson save_image() {
    cost_.complete_all_deferred();  // the cost layer's schedule settles with it
    ImageJson image{{"volume", volume_.save_image()}};
    image["counters"] = counting_.save();
    image["time"] = cost_.save();
    return image;
  }
  // An image into this new engine: the volume as it was saved, counters and
  // emulated time included. Throws ImageError or nlohmann::json::exception.
  void load_image(const ImageJson& image) {
    volume_.load_image(image.at("volume"));
    counting_.load(image.at("counters"));
    cost_.load(image.at("time"));
  }

 private:
  // Tells the observers `later_for` answers for (whether later, from another
  // thread: see CrashObserver) of `report`. Without the lock (an
  // invalidation may wait for page locks that a request holds, and that
  // request may be cut by a crash rule); a removal waits for it.
  void tell_crash_observers(const CrashReport& report,
                            const std::function<std::optional<bool>(int id)>& later_for) {
    std::vector<std::pair<int, CrashObserver*>> observers;
    {
      std::lock_guard lock(observers_mutex_);
      ++observers_busy_;
      for (auto& [id, observer] : crash_observers_) observers.emplace_back(id, &observer);
    }
    for (auto& [id, observer] : observers) {
      if (const std::optional<bool> later = later_for(id)) (*observer)(report, *later);
    }
    {
      std::lock_guard lock(observers_mutex_);
      --observers_busy_;
    }
    observers_idle_.notify_all();
  }

  Volume volume_;
  FaultLayer faults_;
  CostLayer cost_;
  CountingLayer counting_;
  std::unique_ptr<NfsClients> clients_;      // NFS profiles
  NfsClientLayer* first_client_ = nullptr;  // fs(), owned by clients_
  std::mutex observers_mutex_;
  std::map<int, CrashObserver> crash_observers_ GUARDED_BY(observers_mutex_);
  int last_observer_ GUARDED_BY(observers_mutex_) = 0;
  int observers_busy_ GUARDED_BY(observers_mutex_) = 0;  // crashes telling them now
  std::condition_variable observers_idle_;
};

}  // namespace mimicfs
