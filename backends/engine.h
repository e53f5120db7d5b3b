// SPDX-License-Identifier: Apache-2.0
// Engine: a Volume and its layers, stacked as a mount uses them:
//
//   [NfsClientLayer ->] CountingLayer -> CostLayer -> FaultLayer -> Volume
//
// The client layer is there on profiles with client.silly_rename: what it
// sends is what the layers below (the server) see, count and charge.
// fs() is the top, what the FUSE adapter and the engine tests call. The layers
// are also reachable by name for what only they know (fault rules, the clock).
#pragma once

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <string>

#include "backends/cost_layer.h"
#include "backends/counting_layer.h"
#include "backends/data_store.h"
#include "backends/fault_layer.h"
#include "backends/nfs_client_layer.h"
#include "backends/power_cut.h"
#include "backends/volume.h"
#include "backends/wall_clock.h"

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
    faults_.set_crash_hook([this](const PowerCut& cut) { crash(cut, true); });
    if (volume_.profile().silly_rename) client_ = std::make_unique<NfsClientLayer>(counting_);
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  FileSystem& fs() { return client_ ? static_cast<FileSystem&>(*client_) : counting_; }
  Volume& volume() { return volume_; }
  FaultInjector& faults() { return faults_.rules(); }
  CostLayer& cost() { return cost_; }
  void power_on() { faults_.power_on(); }
  // An operation through a descriptor from before the last cut: waits for the
  // restart while the volume is frozen (FaultLayer::wait_while_frozen).
  void wait_while_frozen() { faults_.wait_while_frozen(); }
  bool powered() const { return faults_.powered(); }
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
  // Set once, before any operation (the FUSE adapter's cache invalidation).
  void on_crash(CrashObserver observer) { crash_observer_ = std::move(observer); }

  // A power cut of the whole stack: `ctl crash` (cause "ctl") or a crash rule.
  // With `hold` the volume stays off (EIO) until power_on(), with `freeze` its
  // operations wait for it (FaultLayer::power_off); with `writeback`
  // part of the unsynced overwrites persist first (torn and reordered writes).
  CrashReport crash(const PowerCut& cut, bool during_operation = false) {
    // Operations already waiting on a frozen volume hold page locks the
    // kernel's invalidation needs, whatever this cut is.
    const bool frozen = faults_.frozen() || cut.freeze;
    // First: nothing reaches the crashed volume before the restart.
    if (cut.hold || cut.freeze) faults_.power_off(cut.freeze);
    const uint64_t written_back =
        cut.writeback > 0 ? counting_.write_back_at_random(cut.writeback, cut.seed) : 0;
    CrashReport report = fs().crash();
    faults_.crashed(cut.cause);
    spdlog::warn(
        "power cut: {}{}{}", cut.cause,
        cut.writeback > 0 ? fmt::format("; {} bytes written back first", written_back) : "",
        cut.freeze ? "; the volume stays off, its operations waiting, until `restart`"
        : cut.hold ? "; the volume stays off until `restart`"
                   : "");
    if (crash_observer_) crash_observer_(report, during_operation || frozen);
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
  Volume volume_;
  FaultLayer faults_;
  CostLayer cost_;
  CountingLayer counting_;
  std::unique_ptr<NfsClientLayer> client_;  // NFS profiles
  CrashObserver crash_observer_;
};

}  // namespace mimicfs
