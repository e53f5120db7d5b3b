// SPDX-License-Identifier: Apache-2.0
#include "engine/stats/stats.h"

#include <fmt/format.h>

#include <cstring>

namespace mimicfs {

std::string errno_name(int errno_value) {
  if (const char* name = strerrorname_np(errno_value)) return name;
  return fmt::format("E{}", errno_value);
}

void OperationCounters::record(Op op, uint64_t bytes, int error) {
  auto& counter = counters_[static_cast<size_t>(op)];
  counter.count.fetch_add(1, std::memory_order_relaxed);
  if (bytes) counter.bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (error) {
    std::lock_guard lock(errors_mutex_);
    ++errors_[static_cast<size_t>(op)][error];
  }
}

void OperationCounters::add_time(Op op, uint64_t emulated_ns) {
  if (emulated_ns == 0) return;
  counters_[static_cast<size_t>(op)].emulated_ns.fetch_add(emulated_ns, std::memory_order_relaxed);
}

std::map<std::string, OperationStats> OperationCounters::snapshot() const {
  std::map<std::string, OperationStats> out;
  std::lock_guard lock(errors_mutex_);
  for (size_t i = 0; i < counters_.size(); ++i) {
    const uint64_t count = counters_[i].count.load(std::memory_order_relaxed);
    if (count == 0) continue;
    OperationStats& s = out[std::string(op_name(static_cast<Op>(i)))];
    s.count = count;
    s.bytes = counters_[i].bytes.load(std::memory_order_relaxed);
    s.emulated_ns = counters_[i].emulated_ns.load(std::memory_order_relaxed);
    for (const auto& [error, n] : errors_[i]) s.errors[errno_name(error)] = n;
  }
  return out;
}

void OperationCounters::reset() {
  std::lock_guard lock(errors_mutex_);
  for (auto& c : counters_) {
    c.count.store(0, std::memory_order_relaxed);
    c.bytes.store(0, std::memory_order_relaxed);
    c.emulated_ns.store(0, std::memory_order_relaxed);
  }
  for (auto& e : errors_) e.clear();
}

nlohmann::json to_json(const StatsSnapshot& s) {
  nlohmann::json j;
  j["schema_version"] = StatsSnapshot::kSchemaVersion;
  j["profile"] = s.profile;
  j["clock"] = {{"mode", s.clock.mode}, {"emulated_ns", s.clock.emulated_ns}};
  j["device"] = {
      {"allocation_unit", s.device.allocation_unit},
      {"capacity_bytes", s.device.capacity_bytes},
      {"allocated_bytes", s.device.allocated_bytes},
      {"metadata_bytes", s.device.metadata_bytes},
      {"unreferenced_bytes", s.device.unreferenced_bytes},
      {"reserved_bytes", s.device.reserved_bytes},
      {"free_bytes", s.device.free_bytes},
      {"free_extents", s.device.free_extents},
      {"largest_free_extent_bytes", s.device.largest_free_extent_bytes},
  };
  j["deferred"] = {
      {"pending_tasks", s.deferred.pending_tasks},
      {"pending_free_bytes", s.deferred.pending_free_bytes},
      {"completed_tasks", s.deferred.completed_tasks},
      {"last_due_ns", s.deferred.last_due_ns},
      {"task_ns", s.deferred.task_ns},
  };
  j["background"] = {
      {"flusher_runs", s.background.flusher_runs},
      {"files_written_back", s.background.files_written_back},
      {"bytes_written_back", s.background.bytes_written_back},
      {"commits", s.background.commits},
      {"files_committed", s.background.files_committed},
      {"next_flush_ns", s.background.next_flush_ns},
      {"next_commit_ns", s.background.next_commit_ns},
  };
  j["open"] = {
      {"handles", s.open.handles},
      {"files", s.open.files},
      {"unlinked_files", s.open.unlinked_files},
      {"unlinked_bytes", s.open.unlinked_bytes},
  };
  auto client_json = [](const ClientStats& c) {
    return nlohmann::json{{"silly_renames", c.silly_renames},
                          {"silly_renamed_open", c.silly_renamed_open},
                          {"stale_handles", c.stale_handles},
                          {"stale_attributes", c.stale_attributes},
                          {"lock_conflicts", c.lock_conflicts},
                          {"lost_locks", c.lost_locks},
                          {"crashes", c.crashes},
                          {"deferred_write_errors", c.deferred_write_errors}};
  };
  // The mount's own client; every client, by mount point, where there are
  // several (a volume's stats do not depend on where it is mounted).
  if (s.client) j["client"] = client_json(*s.client);
  if (s.clients.size() > 1) {
    j["clients"] = nlohmann::json::array();
    for (const ClientStats& c : s.clients) {
      j["clients"].push_back(client_json(c));
      j["clients"].back()["mount"] = c.mount;
    }
  }
  j["ops"] = nlohmann::json::object();
  for (const auto& [name, op] : s.ops) {
    nlohmann::json errors = nlohmann::json::object();
    for (const auto& [e, n] : op.errors) errors[e] = n;
    j["ops"][name] = {{"count", op.count},
                      {"bytes", op.bytes},
                      {"emulated_ns", op.emulated_ns},
                      {"errors", errors}};
  }
  j["files"] = nlohmann::json::object();
  for (const auto& [path, f] : s.files) {
    nlohmann::json histogram = nlohmann::json::object();
    for (const auto& [bytes, n] : f.extent_size_histogram) histogram[std::to_string(bytes)] = n;
    j["files"][path] = {
        {"inode", f.inode},
        {"size", f.size},
        {"allocated_bytes", f.allocated_bytes},
        {"extents", f.extents},
        {"fragments", f.fragments},
        {"unwritten_extents", f.unwritten_extents},
        {"holes", f.holes},
        {"delayed_bytes", f.delayed_bytes},
        {"preallocated_bytes", f.preallocated_bytes},
        {"dirty_bytes", f.dirty_bytes},
        {"unsynced_bytes", f.unsynced_bytes},
        {"emulated_ns", f.emulated_ns},
        {"extent_size_histogram", histogram},
    };
  }
  j["faults"] = s.faults;
  if (!s.power.empty()) j["power"] = s.power;
  if (!s.server.empty()) j["server"] = s.server;
  return j;
}

nlohmann::json OperationCounters::save() const {
  std::lock_guard lock(errors_mutex_);
  nlohmann::json saved = nlohmann::json::object();
  for (size_t i = 0; i < counters_.size(); ++i) {
    const Counter& c = counters_[i];
    if (c.count == 0 && c.emulated_ns == 0 && errors_[i].empty()) continue;
    nlohmann::json errors = nlohmann::json::array();
    for (const auto& [error, count] : errors_[i]) errors.push_back({error, count});
    saved[std::string(op_name(static_cast<Op>(i)))] = {
        {"count", c.count.load()}, {"bytes", c.bytes.load()},
        {"emulated_ns", c.emulated_ns.load()}, {"errors", std::move(errors)}};
  }
  return saved;
}

void OperationCounters::load(const nlohmann::json& saved) {
  reset();
  std::lock_guard lock(errors_mutex_);
  for (size_t i = 0; i < counters_.size(); ++i) {
    const auto it = saved.find(std::string(op_name(static_cast<Op>(i))));
    if (it == saved.end()) continue;
    counters_[i].count = it->at("count").get<uint64_t>();
    counters_[i].bytes = it->at("bytes").get<uint64_t>();
    counters_[i].emulated_ns = it->at("emulated_ns").get<uint64_t>();
    for (const auto& error : it->at("errors")) {
      errors_[i][error.at(0).get<int>()] = error.at(1).get<uint64_t>();
    }
  }
}

}  // namespace mimicfs
