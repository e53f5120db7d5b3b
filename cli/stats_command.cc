// SPDX-License-Identifier: Apache-2.0
#include "cli/stats_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/human_units.h"
#include "control/control_command.h"
#include "control/control_files.h"
#include "engine/time/emulated_clock.h"
#include "host/exit_status.h"

namespace mimicfs {
namespace {

// The file's key in stats.json ("/dir/name") for a path given on the command line.
std::string stats_key(const std::string& mountpoint, const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.is_absolute()) {
    std::error_code ec;
    fs::path mount = fs::weakly_canonical(mountpoint, ec);
    fs::path full = fs::weakly_canonical(p, ec);
    fs::path relative = full.lexically_relative(mount);
    if (!relative.empty() && *relative.begin() != "..") p = relative;
  }
  std::string key = p.lexically_normal().generic_string();
  if (!key.starts_with("/")) key = "/" + key;
  return key;
}

// "4K×12 8K×3 1M×2": an extent-size histogram on one line.
std::string histogram_line(const nlohmann::json& histogram) {
  std::vector<std::pair<uint64_t, uint64_t>> buckets;
  for (const auto& [bytes, n] : histogram.items()) {
    buckets.emplace_back(std::stoull(bytes), n.get<uint64_t>());
  }
  std::sort(buckets.begin(), buckets.end());
  std::string line;
  for (const auto& [bytes, n] : buckets) {
    std::string size = bytes >= (uint64_t{1} << 30)   ? fmt::format("{}G", bytes >> 30)
                       : bytes >= (uint64_t{1} << 20) ? fmt::format("{}M", bytes >> 20)
                       : bytes >= 1024                ? fmt::format("{}K", bytes >> 10)
                                                      : fmt::format("{}", bytes);
    line += fmt::format("{}<={}:{}", line.empty() ? "" : " ", size, n);
  }
  return line;
}

// One file's figures, or a sum of them (a directory, the rest, the total).
struct FileRow {
  std::string name;
  uint64_t files = 1;
  uint64_t size = 0, allocated = 0, extents = 0, fragments = 0, unwritten = 0, holes = 0;
  uint64_t delayed = 0, preallocated = 0, dirty = 0, unsynced = 0, emulated_ns = 0;
  std::string extent_sizes;

  void add(const FileRow& other) {
    files += other.files;
    size += other.size;
    allocated += other.allocated;
    extents += other.extents;
    fragments += other.fragments;
    unwritten += other.unwritten;
    holes += other.holes;
    delayed += other.delayed;
    preallocated += other.preallocated;
    dirty += other.dirty;
    unsynced += other.unsynced;
    emulated_ns += other.emulated_ns;
  }
};

FileRow row_of(const std::string& path, const nlohmann::json& f) {
  FileRow r;
  r.name = path;
  r.size = f["size"].get<uint64_t>();
  r.allocated = f["allocated_bytes"].get<uint64_t>();
  r.extents = f["extents"].get<uint64_t>();
  r.fragments = f["fragments"].get<uint64_t>();
  r.unwritten = f["unwritten_extents"].get<uint64_t>();
  r.holes = f["holes"].get<uint64_t>();
  r.delayed = f["delayed_bytes"].get<uint64_t>();
  r.preallocated = f["preallocated_bytes"].get<uint64_t>();
  r.dirty = f["dirty_bytes"].get<uint64_t>();
  r.unsynced = f["unsynced_bytes"].get<uint64_t>();
  r.emulated_ns = f["emulated_ns"].get<uint64_t>();
  r.extent_sizes = histogram_line(f["extent_size_histogram"]);
  return r;
}

// Largest first by the sort key (then by name); by name alone for "name".
void sort_rows(std::vector<FileRow>& rows, const std::string& key) {
  const auto figure = [&](const FileRow& r) -> uint64_t {
    if (key == "size") return r.size;
    if (key == "allocated") return r.allocated;
    if (key == "extents") return r.extents;
    if (key == "emulated") return r.emulated_ns;
    if (key == "unsynced") return r.unsynced;
    return 0;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const FileRow& a, const FileRow& b) {
    if (figure(a) != figure(b)) return figure(a) > figure(b);
    return a.name < b.name;
  });
}

// A path cut in the middle to `width` columns, keeping its file name whole and
// as much of its directory's start as fits ("/base/16384/pg...ce/16400_vm"),
// or, where the file name alone does not fit, keeping both ends of the path.
std::string fit(const std::string& name, size_t width) {
  if (name.size() <= width) return name;
  if (width < 8) return name.substr(name.size() - width);
  const size_t slash = name.rfind('/');
  const std::string_view base =
      slash == std::string::npos ? std::string_view() : std::string_view(name).substr(slash);
  if (!base.empty() && base.size() + 3 <= width) {
    return name.substr(0, width - 3 - base.size()) + "..." + std::string(base);
  }
  const size_t tail = (width - 3) / 2 + (width - 3) % 2;
  return name.substr(0, width - 3 - tail) + "..." + name.substr(name.size() - tail);
}

// The terminal's width, or kPipeWidth when standard output is not a terminal
// (a CI log, a file): wide enough for the figures, narrow enough to read.
constexpr size_t kPipeWidth = 100;
size_t terminal_width() {
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return kPipeWidth;
}

struct Column {
  const char* title;
  size_t width;
  int rank;  // kept first when the width is short: 1 before 2 ...
  std::function<std::string(const FileRow&)> text;
};

const std::vector<Column>& columns() {
  static const std::vector<Column> all = {
      {"size", 10, 1, [](const FileRow& r) { return bytes_text(r.size); }},
      {"allocated", 10, 1, [](const FileRow& r) { return bytes_text(r.allocated); }},
      {"extents", 8, 1, [](const FileRow& r) { return std::to_string(r.extents); }},
      {"fragments", 9, 2, [](const FileRow& r) { return std::to_string(r.fragments); }},
      {"unwritten", 9, 4, [](const FileRow& r) { return std::to_string(r.unwritten); }},
      {"holes", 6, 3, [](const FileRow& r) { return std::to_string(r.holes); }},
      {"delayed", 10, 5, [](const FileRow& r) { return bytes_text(r.delayed); }},
      {"prealloc", 10, 4, [](const FileRow& r) { return bytes_text(r.preallocated); }},
      {"dirty", 10, 5, [](const FileRow& r) { return bytes_text(r.dirty); }},
      {"unsynced", 10, 2, [](const FileRow& r) { return bytes_text(r.unsynced); }},
      {"emulated", 12, 2, [](const FileRow& r) { return duration_text(r.emulated_ns); }},
  };
  return all;
}

// The table in `width` columns (0: no limit). Whole columns only, never a
// value cut: the name column gets at least a third of the width (or its
// widest name), the figures' columns that fit beside it in rank order, the
// free-form last column (extent sizes, a directory's files) when it fits
// whole, and the name column whatever is left, names cut in the middle.
void print_rows(const std::vector<FileRow>& rows, const std::vector<FileRow>& summaries,
                std::string_view first, bool directories, size_t width) {
  size_t widest = first.size();
  for (const FileRow& r : rows) widest = std::max(widest, r.name.size());
  size_t label_width = 0;  // the summaries' labels are never cut
  for (const FileRow& r : summaries) label_width = std::max(label_width, r.name.size());
  widest = std::max(widest, label_width);
  const auto last_text = [&](const FileRow& r, bool summary) {
    return directories ? std::to_string(r.files)
           : summary   ? fmt::format("{} {}", r.files, noun(r.files, "file"))
                       : r.extent_sizes;
  };
  size_t last_width = directories ? 5 : 12;  // the title's
  for (const FileRow& r : rows) last_width = std::max(last_width, last_text(r, false).size());
  for (const FileRow& r : summaries) last_width = std::max(last_width, last_text(r, true).size());
  std::vector<bool> shown(columns().size(), true);
  const auto columns_width = [&] {
    size_t used = 0;
    for (size_t i = 0; i < columns().size(); ++i) {
      if (shown[i]) used += 1 + columns()[i].width;
    }
    return used;
  };
  size_t name_width = widest;
  bool show_last = true;
  if (width > 0) {
    const size_t least_name = std::max(std::min(widest, std::max<size_t>(width / 3, 24)), label_width);
    for (int rank = 5; rank >= 1 && least_name + columns_width() > width; --rank) {
      for (size_t i = 0; i < columns().size(); ++i) {
        if (columns()[i].rank == rank) shown[i] = false;
      }
    }
    const size_t used = columns_width();
    show_last = least_name + used + 2 + last_width <= width;
    const size_t left = width > used + (show_last ? 2 + last_width : 0)
                            ? width - used - (show_last ? 2 + last_width : 0)
                            : 0;
    name_width = std::clamp(left, std::min(least_name, widest), widest);
  }
  const auto line = [&](const std::string& name, const std::function<std::string(size_t)>& cell,
                        const std::string& last) {
    std::string text = fmt::format("{:<{}}", fit(name, name_width), name_width);
    for (size_t i = 0; i < columns().size(); ++i) {
      if (shown[i]) text += fmt::format(" {:>{}}", cell(i), columns()[i].width);
    }
    if (show_last && !last.empty()) text += "  " + last;
    // Only a width too narrow for a name and the first figures: a last resort.
    if (width > 0 && text.size() > width) text.resize(width);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    fmt::print("{}\n", text);
  };
  line(
      std::string(first), [](size_t i) { return std::string(columns()[i].title); },
      directories ? "files" : "extent sizes");
  const auto print = [&](const FileRow& r, bool summary) {
    line(
        r.name, [&](size_t i) { return columns()[i].text(r); }, last_text(r, summary));
  };
  for (const FileRow& r : rows) print(r, false);
  for (const FileRow& r : summaries) print(r, true);
}

// The file lines as the view asks for them (per file or per directory, sorted,
// the first --top of them), and the summary lines: the rest, then the total.
struct FileTable {
  std::vector<FileRow> rows;
  std::vector<FileRow> summaries;
};

FileTable table_of(const nlohmann::json& files, const StatsView& view) {
  FileTable table;
  std::vector<FileRow>& rows = table.rows;
  FileRow total;
  total.files = 0;
  for (const auto& [path, f] : files.items()) {
    rows.push_back(row_of(path, f));
    total.add(rows.back());
  }
  total.name = "total";
  if (view.by_directory) {
    std::map<std::string, FileRow> by_directory;
    for (const FileRow& r : rows) {
      const size_t slash = r.name.rfind('/');
      const std::string dir = slash == 0 ? "/" : r.name.substr(0, slash);
      auto [it, added] = by_directory.try_emplace(dir);
      if (added) {
        it->second.name = dir;
        it->second.files = 0;
      }
      it->second.add(r);
    }
    rows.clear();
    for (auto& [dir, r] : by_directory) rows.push_back(std::move(r));
  }
  sort_rows(rows, view.sort);
  if (view.top > 0 && rows.size() > view.top) {
    FileRow rest;
    rest.files = 0;
    for (size_t i = view.top; i < rows.size(); ++i) rest.add(rows[i]);
    const size_t more = rows.size() - view.top;
    rest.name =
        fmt::format("({} more {})", more, noun(more, view.by_directory ? "directory" : "file"));
    rows.resize(view.top);
    table.summaries.push_back(std::move(rest));
  }
  table.summaries.push_back(std::move(total));
  return table;
}

void print_files(const nlohmann::json& files, const StatsView& view) {
  const FileTable table = table_of(files, view);
  const size_t width = view.wide ? 0 : view.width != 0 ? view.width : terminal_width();
  fmt::print("\n");
  print_rows(table.rows, table.summaries, view.by_directory ? "directory" : "file",
             view.by_directory, width);
}

// A line of the table as JSON, with stats.json's names for the figures.
nlohmann::json row_json(const FileRow& r, std::string_view key) {
  return nlohmann::json{{std::string(key), r.name},
                        {"files", r.files},
                        {"size", r.size},
                        {"allocated_bytes", r.allocated},
                        {"extents", r.extents},
                        {"fragments", r.fragments},
                        {"unwritten_extents", r.unwritten},
                        {"holes", r.holes},
                        {"delayed_bytes", r.delayed},
                        {"preallocated_bytes", r.preallocated},
                        {"dirty_bytes", r.dirty},
                        {"unsynced_bytes", r.unsynced},
                        {"emulated_ns", r.emulated_ns}};
}

// --json with --sort, --top or --by-dir: the lines the table would print, in
// its order, as "rows" (each file's or directory's sums; "rest" and "total"
// the summary lines); with --top per file, "files" keeps those files alone.
void add_table(nlohmann::json& stats, const StatsView& view) {
  const FileTable table = table_of(stats["files"], view);
  const std::string_view key = view.by_directory ? "directory" : "path";
  nlohmann::json rows = nlohmann::json::array();
  for (const FileRow& r : table.rows) rows.push_back(row_json(r, key));
  nlohmann::json summary = {{"by", view.by_directory ? "directory" : "file"},
                            {"sort", view.sort},
                            {"lines", std::move(rows)}};
  if (table.summaries.size() == 2) summary["rest"] = row_json(table.summaries[0], "line");
  summary["total"] = row_json(table.summaries.back(), "line");
  if (view.top > 0 && !view.by_directory) {
    nlohmann::json kept = nlohmann::json::object();
    for (const FileRow& r : table.rows) kept[r.name] = stats["files"][r.name];
    stats["files"] = std::move(kept);
  }
  stats["rows"] = std::move(summary);
}

void print_tables(const nlohmann::json& s, const StatsView& view) {
  const auto& d = s["device"];
  fmt::print("profile {}\n", s["profile"].get<std::string>());
  fmt::print("clock   {} ({} ns emulated), latency {}\n",
             duration_text(s["clock"]["emulated_ns"].get<uint64_t>()),
             s["clock"]["emulated_ns"].get<uint64_t>(), s["clock"]["mode"].get<std::string>());
  fmt::print("device  capacity {} in {} B units: allocated {}, reserved {}\n",
             bytes_text(d["capacity_bytes"].get<uint64_t>()), d["allocation_unit"].get<uint64_t>(),
             bytes_text(d["allocated_bytes"].get<uint64_t>()),
             bytes_text(d["reserved_bytes"].get<uint64_t>()));
  fmt::print("        allocated includes the emulated filesystem's own metadata {} and {} of\n",
             bytes_text(d["metadata_bytes"].get<uint64_t>()),
             bytes_text(d["unreferenced_bytes"].get<uint64_t>()));
  fmt::print("        copy-on-write extents kept whole; free extents {}, the largest {}\n",
             d["free_extents"].get<uint64_t>(),
             bytes_text(d["largest_free_extent_bytes"].get<uint64_t>()));
  fmt::print("\n{:<15} {:>12} {:>16} {:>14}  {}\n", "operation", "count", "bytes", "emulated",
             "errors");
  for (const auto& [name, op] : s["ops"].items()) {
    std::string errors;
    for (const auto& [e, n] : op["errors"].items()) {
      errors += fmt::format("{}{}={}", errors.empty() ? "" : " ", e, n.get<uint64_t>());
    }
    fmt::print("{:<15} {:>12} {:>16} {:>14}  {}\n", name, op["count"].get<uint64_t>(),
               op["bytes"].get<uint64_t>(), duration_text(op["emulated_ns"].get<uint64_t>()),
               errors);
  }
  print_files(s["files"], view);
  if (!s["faults"].empty()) {
    fmt::print("\n{:>8} {:>8}  {}\n", "matched", "fired", "fault rule");
    for (const auto& rule : s["faults"]) {
      fmt::print("{:>8} {:>8}  {}\n", rule["matched"].get<uint64_t>(),
                 rule["fired"].get<uint64_t>(), rule["rule"].get<std::string>());
    }
  }
}

}  // namespace

int print_stats(const std::string& mountpoint, const StatsView& view) {
  const std::string& path = view.path;
  const std::string file = ControlFiles::path_in(mountpoint, "stats.json");
  std::ifstream in(file);
  if (!in) {
    fmt::print(stderr, "mimicfs stats: {} is not a mimicfs mount (cannot read {}: {})\n",
               mountpoint, file, std::strerror(errno));
    return kExitUsage;
  }
  nlohmann::json stats;
  try {
    stats = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fmt::print(stderr, "mimicfs stats: {}: malformed statistics: {}\n", file, e.what());
    return kExitFailure;
  }
  if (!path.empty()) {
    const std::string key = stats_key(mountpoint, path);
    if (!stats["files"].contains(key)) {
      fmt::print(stderr, "mimicfs stats: no regular file {} in {}\n", key, mountpoint);
      return kExitUsage;
    }
    nlohmann::json only = nlohmann::json::object();
    only[key] = stats["files"][key];
    stats["files"] = only;
  }
  if (view.json) {
    if (view.top > 0 || view.by_directory || view.sort_given) add_table(stats, view);
    fmt::print("{}\n", stats.dump(2));
  } else {
    print_tables(stats, view);
  }
  return kExitOk;
}


void add_stats_command(CLI::App& app, CommandAction& action) {
  struct Choice {
    std::string mountpoint;
    StatsView view;
  };
  auto choice = std::make_shared<Choice>();
  StatsView& view = choice->view;
  CLI::App* command = app.add_subcommand("stats", "Print a mounted volume's statistics");
  command->add_option("MOUNT", choice->mountpoint, "The mountpoint")->required();
  command->add_option("PATH", view.path, "Only this file (inside the mount)");
  command->add_flag("--json", view.json,
                    "Print the stats.json document (with --sort, --top or --by-dir, also the "
                    "table's lines as \"rows\")");
  command
      ->add_option("--sort", view.sort,
                   "Order the files by name (default), or largest first by size, allocated, "
                   "extents, emulated or unsynced")
      ->check(CLI::IsMember({"name", "size", "allocated", "extents", "emulated", "unsynced"}));
  command->add_option("--top", view.top, "Only the first N files; the rest summed on one line");
  command->add_flag("--by-dir", view.by_directory, "A line per directory instead of per file");
  auto* width = command->add_option(
      "--width", view.width, "Fit the table in N columns (default: the terminal's; 100 in a pipe)");
  command->add_flag("--wide", view.wide, "No width limit: every column and whole paths")
      ->excludes(width);
  command->callback([command, choice, &action] {
    choice->view.sort_given = command->count("--sort") > 0;
    action = [choice] { return print_stats(choice->mountpoint, choice->view); };
  });
}

}  // namespace mimicfs
