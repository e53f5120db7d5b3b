// SPDX-License-Identifier: Apache-2.0
#include "cli/report_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/human_units.h"
#include "host/exit_status.h"

namespace mimicfs {
namespace {

// The picture has two views. The device: its used part as rows of cells, each
// coloured by the file whose blocks it holds (dark grey when several files
// share it). And each file: a line of its figures, then a strip of the file
// itself from offset 0 to its end, its extents in turn in two shades of its
// colour, holes left blank. The device view shows where blocks are; the strip
// shows how the file is cut up, which the device view cannot: a file of 1024
// extents laid end to end on the device (posix_fallocate on NFS) is one solid
// run there and a striped strip here, beside a 1-extent file's solid one.
// The files are ranked (by extents or allocated bytes): the first
// kRankedFiles get colours of their own and a strip, the rest share one,
// "other", summed on one legend line.
constexpr int kColumns = 1000;
constexpr int kRows = 48;
constexpr int kCellWidth = 1;
constexpr int kRowHeight = 10;
constexpr int kLeft = 20;
constexpr int kTop = 84;
constexpr int kLegendLine = 18;
constexpr int kStripIndent = 18;
constexpr int kStripWidth = kColumns - kStripIndent;
constexpr int kStripHeight = 9;
constexpr int kFileLine = kLegendLine + kStripHeight + 8;
constexpr int kEmpty = -1;
constexpr int kShared = -2;
constexpr int kOther = -3;

// Twenty colours told apart at a glance (Tableau's 10, then darker and lighter
// variants), none of them the empty, shared or other grey.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79",
                                    "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
                                    "#e6550d", "#31a354", "#756bb1", "#fd8d3c", "#6baed6"};
constexpr size_t kRankedFiles = std::size(kPalette);

// A cell's colour by its rank (0 first), or kEmpty, kShared, kOther.
std::string colour_of(int rank) {
  if (rank == kEmpty) return "#eeeeee";
  if (rank == kShared) return "#555555";
  if (rank == kOther) return "#b0b0b0";
  return kPalette[rank];
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The second shade of a ranked file's strip: its colour at half brightness.
std::string darker(int rank) {
  unsigned rgb = 0;
  std::sscanf(kPalette[rank] + 1, "%6x", &rgb);
  const auto half = [&](int shift) { return ((rgb >> shift) & 0xff) / 2; };
  return fmt::format("#{:02x}{:02x}{:02x}", half(16), half(8), half(0));
}

// A file's strip: the file from offset 0 to its end across kStripWidth pixels,
// each pixel the shade of the last extent in it (even, odd), or blank where
// only a hole is. An extent narrower than a pixel still marks one, so
// extents alternating faster than the pixels show as a mottled strip.
std::string strip_svg(const nlohmann::json& extents, uint64_t size_units, int rank, int x, int y,
                      const std::string& path) {
  uint64_t span = size_units;
  for (const auto& e : extents) span = std::max(span, e[0].get<uint64_t>() + e[2].get<uint64_t>());
  span = std::max<uint64_t>(span, 1);
  constexpr int kHole = -1;
  std::vector<int> pixel(kStripWidth, kHole);
  int index = 0;
  for (const auto& e : extents) {
    const uint64_t logical = e[0], length = e[2];
    const auto at = [&](uint64_t unit) { return unit * kStripWidth / span; };
    const uint64_t from = at(logical);
    const uint64_t to = std::max(from + 1, (logical + length) * kStripWidth / span +
                                               ((logical + length) * kStripWidth % span != 0));
    for (uint64_t p = from; p < to && p < pixel.size(); ++p) pixel[p] = index % 2;
    ++index;
  }
  std::string svg = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f2f2f2\" "
      "data-strip=\"{}\"/>\n",
      x, y, kStripWidth, kStripHeight, escape(path));
  for (int p = 0; p < kStripWidth;) {
    int stop = p + 1;
    while (stop < kStripWidth && pixel[stop] == pixel[p]) ++stop;
    if (pixel[p] != kHole) {
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n",
                         x + p, y, stop - p, kStripHeight,
                         pixel[p] == 0 ? colour_of(rank) : darker(rank));
    }
    p = stop;
  }
  return svg;
}


struct FileFigures {
  std::string path;
  uint64_t size = 0;
  uint64_t blocks = 0;
  uint64_t extents = 0;
  uint64_t fragments = 0;
};

}  // namespace

std::string render_layout_svg(const nlohmann::json& layout, ReportRanking ranking) {
  const auto& device = layout["device"];
  const uint64_t unit = device["allocation_unit"].get<uint64_t>();

  // The span that holds file blocks, and each file's figures.
  uint64_t first = UINT64_MAX, end = 0;
  std::vector<FileFigures> files;
  for (const auto& [path, file] : layout["files"].items()) {
    FileFigures f{path, file["size"].get<uint64_t>()};
    int64_t previous_offset = 0;
    for (const auto& e : file["extents"]) {
      const uint64_t logical = e[0], physical = e[1], length = e[2];
      first = std::min(first, physical);
      end = std::max(end, physical + length);
      const int64_t offset = static_cast<int64_t>(physical) - static_cast<int64_t>(logical);
      if (f.extents == 0 || offset != previous_offset) ++f.fragments;
      previous_offset = offset;
      ++f.extents;
      f.blocks += length;
    }
    files.push_back(f);
  }
  if (end == 0) first = 0;
  const uint64_t span = std::max<uint64_t>(end - first, 1);
  const uint64_t cells = uint64_t{kColumns} * kRows;
  const uint64_t cell_blocks = (span + cells - 1) / cells;
  // Rows past the last used cell are left out.
  const int rows = static_cast<int>(std::clamp<uint64_t>(
      (span + cell_blocks * kColumns - 1) / (cell_blocks * kColumns), 1, kRows));

  std::vector<int> owner(cells, kEmpty);
  int index = 0;
  for (const auto& [path, file] : layout["files"].items()) {
    for (const auto& e : file["extents"]) {
      const uint64_t physical = e[1], length = e[2];
      const uint64_t from = (physical - first) / cell_blocks;
      const uint64_t to = (physical + length - 1 - first) / cell_blocks;
      for (uint64_t c = from; c <= to && c < cells; ++c) {
        owner[c] = owner[c] == kEmpty || owner[c] == index ? index : kShared;
      }
    }
    ++index;
  }

  // The ranking: most extents (or allocated blocks) first, then by path.
  std::vector<int> order(files.size());
  for (size_t i = 0; i < files.size(); ++i) order[i] = static_cast<int>(i);
  const auto figure = [&](const FileFigures& f) {
    return ranking == ReportRanking::kAllocated ? f.blocks : f.extents;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return figure(files[a]) > figure(files[b]); });
  std::vector<int> rank_of(files.size(), kOther);
  for (size_t r = 0; r < std::min(order.size(), kRankedFiles); ++r) {
    rank_of[order[r]] = static_cast<int>(r);
  }
  // What a cell shows: its file's rank, "other", empty or shared.
  const auto shown = [&](int who) { return who >= 0 ? rank_of[who] : who; };

  const size_t ranked = std::min(files.size(), kRankedFiles);
  const int height = kTop + rows * kRowHeight + 64 + static_cast<int>(ranked) * kFileLine +
                     (files.size() > kRankedFiles ? kLegendLine : 0);
  const int width = kLeft * 2 + kColumns * kCellWidth;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  svg += fmt::format(
      "<text x=\"{}\" y=\"20\" font-size=\"16\">mimicfs device layout, profile {}</text>\n", kLeft,
      escape(layout["profile"].get<std::string>()));
  const uint64_t free_extents = device["free_extents"].get<uint64_t>();
  svg += fmt::format(
      "<text x=\"{}\" y=\"40\">device blocks {}..{} of {}, {} per block; a cell {}, a row "
      "{}</text>\n",
      kLeft, first, end, device["capacity_bytes"].get<uint64_t>() / unit, bytes_text(unit),
      bytes_text(cell_blocks * unit), bytes_text(cell_blocks * unit * kColumns));
  svg += fmt::format(
      "<text x=\"{}\" y=\"56\">allocated {} (the emulated filesystem's own metadata {}); {} "
      "free {}, the largest {}</text>\n",
      kLeft, bytes_text(device["allocated_bytes"].get<uint64_t>()),
      bytes_text(device.value("metadata_bytes", uint64_t{0})), free_extents,
      noun(free_extents, "extent"), bytes_text(device["largest_free_extent_bytes"].get<uint64_t>()));
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-weight=\"bold\">The device: each cell coloured by the "
      "file holding its blocks (dark grey: several files)</text>\n",
      kLeft, kTop - 8);

  // Runs of cells that show the same, one rect each: a ranked file's runs
  // name it, the other files' runs are one colour.
  for (int row = 0; row < rows; ++row) {
    int column = 0;
    while (column < kColumns) {
      const int who = owner[row * kColumns + column];
      const int rank = shown(who);
      int stop = column + 1;
      while (stop < kColumns && (rank == kOther ? shown(owner[row * kColumns + stop]) == kOther
                                                : owner[row * kColumns + stop] == who)) {
        ++stop;
      }
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}/>\n",
                         kLeft + column * kCellWidth, kTop + row * kRowHeight,
                         (stop - column) * kCellWidth, kRowHeight - 1, colour_of(rank),
                         rank >= 0 ? fmt::format(" data-file=\"{}\"", escape(files[who].path))
                         : rank == kOther ? std::string(" data-file=\"other\"")
                                          : std::string());
      column = stop;
    }
  }

  // Legend: the ranked files, each with its strip, then the others summed.
  int y = kTop + rows * kRowHeight + 44;
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-weight=\"bold\">Each file: size, allocated, extents "
      "(FIEMAP records), fragments (filefrag); ranked by {}</text>\n",
      kLeft, y - 22, ranking == ReportRanking::kAllocated ? "allocated bytes" : "extents");
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\">and its strip: the file from offset 0 to its end, its extents "
      "in turn in two shades, holes blank</text>\n",
      kLeft, y - 6);
  const auto legend_line = [&](int rank, const FileFigures& f) {
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\">{}: {}, {}, {} {}, {} {}</text>\n",
        kLeft, y, colour_of(rank), kLeft + kStripIndent, y + 11, escape(f.path),
        bytes_text(f.size), bytes_text(f.blocks * unit), f.extents, noun(f.extents, "extent"),
        f.fragments, noun(f.fragments, "fragment"));
    y += kLegendLine;
  };
  for (size_t r = 0; r < ranked; ++r) {
    const FileFigures& f = files[order[r]];
    legend_line(static_cast<int>(r), f);
    svg += strip_svg(layout["files"][f.path]["extents"], (f.size + unit - 1) / unit,
                     static_cast<int>(r), kLeft + kStripIndent, y, f.path);
    y += kFileLine - kLegendLine;
  }
  if (files.size() > kRankedFiles) {
    const size_t others = files.size() - kRankedFiles;
    FileFigures other{fmt::format("{} other {}", others, noun(others, "file"))};
    for (size_t r = kRankedFiles; r < order.size(); ++r) {
      const FileFigures& f = files[order[r]];
      other.size += f.size;
      other.blocks += f.blocks;
      other.extents += f.extents;
      other.fragments += f.fragments;
    }
    legend_line(kOther, other);
  }
  svg += "</svg>\n";
  return svg;
}

int write_report(const std::string& mountpoint, const std::string& out, ReportRanking ranking) {
  // (render_layout_svg trusts its input; this checks what it reads first.)
  const std::string file = (std::filesystem::path(mountpoint) / ".mimicfs/layout.json").string();
  std::ifstream in(file);
  if (!in) {
    fmt::print(stderr, "mimicfs report: {} is not a mimicfs mount (cannot read {}: {})\n",
               mountpoint, file, std::strerror(errno));
    return kExitUsage;
  }
  if (!out.ends_with(".svg")) {
    fmt::print(stderr, "mimicfs report: --out must name a .svg file (got \"{}\")\n", out);
    return kExitUsage;
  }
  nlohmann::json layout;
  try {
    layout = nlohmann::json::parse(in);
    if (layout.at("schema_version") != 1) throw std::runtime_error("unknown schema_version");
    if (layout.at("device").at("allocation_unit").get<uint64_t>() == 0) {
      throw std::runtime_error("allocation_unit is 0");
    }
    for (const auto& [path, f] : layout.at("files").items()) {
      for (const auto& e : f.at("extents")) {
        if (e.size() != 4 || e[2].get<uint64_t>() == 0)
          throw std::runtime_error("bad extent in " + path);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "mimicfs report: {}: malformed layout: {}\n", file, e.what());
    return kExitFailure;
  }
  const std::string svg = render_layout_svg(layout, ranking);
  std::ofstream output(out);
  output << svg;
  output.flush();
  if (!output) {
    fmt::print(stderr, "mimicfs report: cannot write {}: {}\n", out, std::strerror(errno));
    return kExitFailure;
  }
  return kExitOk;
}

void add_report_command(CLI::App& app, CommandAction& action) {
  struct Choice {
    std::string mountpoint, out, rank = "extents";
  };
  auto choice = std::make_shared<Choice>();
  CLI::App* command =
      app.add_subcommand("report", "Draw a mounted volume's device layout as SVG");
  command->add_option("MOUNT", choice->mountpoint, "The mountpoint")->required();
  command->add_option("--out", choice->out, "The .svg file to write")->required();
  command
      ->add_option("--rank", choice->rank,
                   "The 20 files with colours of their own: most extents (default) or allocated")
      ->check(CLI::IsMember({"extents", "allocated"}));
  command->callback([choice, &action] {
    action = [choice] {
      return write_report(choice->mountpoint, choice->out,
                          choice->rank == "allocated" ? ReportRanking::kAllocated
                                                      : ReportRanking::kExtents);
    };
  });
}

}  // namespace mimicfs
