// SPDX-License-Identifier: Apache-2.0
// HostDataStore: contents in sparse host files under a data directory, as
// sparse as the emulated file, and a directory refused with one line when it
// cannot be used, with nothing in it overwritten.
#include "engine/data/host_data_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace mimicfs {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kPage = HostFileData::kPageSize;

class HostDataStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "mimicfs-store.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<HostDataStore> open_store() {
    auto store = HostDataStore::open(dir_);
    EXPECT_TRUE(store.has_value()) << store.error();
    return store ? std::move(*store) : nullptr;
  }
  std::string refusal() {
    auto store = HostDataStore::open(dir_);
    EXPECT_FALSE(store.has_value());
    return store ? std::string() : store.error();
  }
  static std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string dir_;
};

std::vector<std::byte> pattern(size_t count, uint8_t seed) {
  std::vector<std::byte> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = std::byte(static_cast<uint8_t>(1 + (seed + i) % 251));
  return out;
}

std::vector<std::byte> read(const FileData& file, uint64_t offset, size_t length) {
  std::vector<std::byte> out(length, std::byte{0xEE});  // poison: every byte must be filled
  file.read(offset, out);
  return out;
}

uint64_t nonzero_pages(const std::vector<std::byte>& model) {
  uint64_t pages = 0;
  for (uint64_t page = 0; page * kPage < model.size(); ++page) {
    const auto first = model.begin() + page * kPage;
    const auto last = model.begin() + std::min<uint64_t>(model.size(), (page + 1) * kPage);
    if (std::any_of(first, last, [](std::byte b) { return b != std::byte{0}; })) ++pages;
  }
  return pages;
}

TEST_F(HostDataStoreTest, AnEmptyDirectoryBecomesADataDirectory) {
  auto store = open_store();
  ASSERT_TRUE(store);
  EXPECT_EQ(slurp(fs::path(dir_) / "mimicfs-data"), HostDataStore::kMarkerText);
  EXPECT_TRUE(fs::is_directory(fs::path(dir_) / "files"));
}

TEST_F(HostDataStoreTest, AFileHasNoHostFileUntilItHoldsData) {
  auto store = open_store();
  auto file = store->create_file();
  file->write(0, std::vector<std::byte>(3 * kPage, std::byte{0}));
  EXPECT_TRUE(fs::is_empty(fs::path(dir_) / "files"));
  EXPECT_EQ(read(*file, 0, 3 * kPage), std::vector<std::byte>(3 * kPage, std::byte{0}));
  const auto data = pattern(100, 3);
  ASSERT_TRUE(file->reserve(5000, data));
  file->write(5000, data);
  EXPECT_EQ(read(*file, 5000, 100), data);
  EXPECT_EQ(file->stored_bytes(), kPage);
  const fs::path host = fs::path(dir_) / "files" / static_cast<HostFileData&>(*file).name();
  EXPECT_EQ(fs::file_size(host), 5100u);
  file.reset();
  EXPECT_TRUE(fs::exists(host)) << "a host file with data stays for the saved volume";
  auto emptied = store->reopen_file(host.filename().string());
  ASSERT_TRUE(emptied.has_value()) << emptied.error();
  EXPECT_EQ(read(**emptied, 5000, 100), data);
  (*emptied)->zero(0, 5100);
  EXPECT_EQ((*emptied)->key(), "") << "an empty file is not kept";
  emptied->reset();
  EXPECT_FALSE(fs::exists(host)) << "an emptied file (a removed one) takes its host file";
}

TEST_F(HostDataStoreTest, ZerosInsideDataArePunchedAndAtTheEndCutShort) {
  auto store = open_store();
  auto file = store->create_file();
  const auto data = pattern(8 * kPage, 1);
  file->write(0, data);
  EXPECT_EQ(file->stored_bytes(), 8 * kPage);
  file->write(2 * kPage, std::vector<std::byte>(2 * kPage, std::byte{0}));  // zeros written
  EXPECT_EQ(file->stored_bytes(), 6 * kPage);
  file->zero(5 * kPage + 10, kPage - 10);  // page 5 keeps 10 bytes
  EXPECT_EQ(file->stored_bytes(), 6 * kPage);
  file->zero(5 * kPage, 10);  // and now none
  EXPECT_EQ(file->stored_bytes(), 5 * kPage);
  file->zero(6 * kPage + 1, 100 * kPage);  // the tail (page 7 goes): page 6 keeps one byte
  EXPECT_EQ(file->stored_bytes(), 4 * kPage);
  EXPECT_EQ(read(*file, 6 * kPage, 2), (std::vector<std::byte>{data[6 * kPage], std::byte{0}}));
  file->zero(6 * kPage, 1);
  EXPECT_EQ(file->stored_bytes(), 3 * kPage);
  auto expected = data;
  std::fill(expected.begin() + 2 * kPage, expected.end(), std::byte{0});
  std::fill(expected.begin() + 5 * kPage, expected.end(), std::byte{0});
  std::copy(data.begin() + 4 * kPage, data.begin() + 5 * kPage, expected.begin() + 4 * kPage);
  EXPECT_EQ(read(*file, 0, 8 * kPage), expected);
}

// The memory store's model test, on host files: every byte as in a flat model,
// and exactly the pages holding a non-zero byte take blocks.
TEST_F(HostDataStoreTest, RandomWritesAndZeroesMatchAFlatModel) {
  // At most 4 extents, which an ext4 inode holds itself: no extent-tree block in st_blocks.
  constexpr uint64_t kSize = 4 * kPage;
  auto store = open_store();
  auto file = store->create_file();
  std::mt19937_64 random(5);
  auto below = [&](uint64_t n) { return random() % n; };
  std::vector<std::byte> model(kSize, std::byte{0});
  for (int step = 0; step < 2000; ++step) {
    const uint64_t offset = below(kSize);
    const uint64_t length = 1 + below(std::min<uint64_t>(2 * kPage, kSize - offset));
    if (below(3) == 0) {
      file->zero(offset, length);
      std::fill(model.begin() + offset, model.begin() + offset + length, std::byte{0});
    } else {
      const auto data = below(2) == 0 ? std::vector<std::byte>(length, std::byte{0})
                                      : pattern(length, step % 200);
      ASSERT_TRUE(file->reserve(offset, data)) << "step " << step;
      file->write(offset, data);
      std::copy(data.begin(), data.end(), model.begin() + offset);
    }
    ASSERT_EQ(read(*file, 0, kSize), model) << "step " << step;
    ASSERT_EQ(file->stored_bytes(), nonzero_pages(model) * kPage) << "step " << step;
  }
}

TEST_F(HostDataStoreTest, ADirectoryInUseIsRefused) {
  auto store = open_store();
  EXPECT_EQ(refusal(), "--data-dir " + dir_ + ": in use by another mimicfs mount");
  store.reset();
  EXPECT_TRUE(open_store()) << "the lock goes with the store";
}

TEST_F(HostDataStoreTest, ADirectoryWhoseDaemonDiedServingIsRefusedAsItIs) {
  {
    auto store = open_store();
    ASSERT_TRUE(store->begin_serving().has_value());
    auto file = store->create_file();
    file->write(0, pattern(100, 1));
    // A daemon killed: nothing removed, nothing saved.
  }
  EXPECT_EQ(refusal(), "--data-dir " + dir_ +
                           ": the mimicfs that served it last did not unmount (killed?), so its "
                           "files no longer match its saved volume; empty the directory to start "
                           "afresh");
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "files" / "1")) << "nothing removed";
}

TEST_F(HostDataStoreTest, FilesWithoutASavedVolumeAreRefused) {
  open_store().reset();
  std::ofstream(fs::path(dir_) / "files" / "17") << "stale";
  EXPECT_EQ(refusal(), "--data-dir " + dir_ +
                           ": files/ holds \"17\" but no volume is saved (volume.meta is "
                           "missing); empty the directory to start afresh");
}

TEST_F(HostDataStoreTest, ASavedVolumeIsReadBackAndOneOfAnotherVersionOrCorruptIsRefused) {
  {
    auto store = open_store();
    EXPECT_FALSE(store->load_volume().value().has_value()) << "nothing saved yet";
    ASSERT_TRUE(store->save_volume(ImageJson{{"volume", {{"x", 1}}}}).has_value());
    auto loaded = store->load_volume();
    ASSERT_TRUE(loaded.has_value()) << loaded.error();
    ASSERT_TRUE(loaded->has_value());
    EXPECT_EQ((**loaded)["volume"]["x"], 1);
    EXPECT_EQ((**loaded)["version"], 1);
  }
  const fs::path meta = fs::path(dir_) / "volume.meta";
  auto write_meta = [&](const std::vector<std::uint8_t>& bytes) {
    std::ofstream(meta, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  write_meta(ImageJson::to_cbor(ImageJson{{"format", "mimicfs volume"}, {"version", 9}}));
  auto loaded = open_store()->load_volume();
  ASSERT_FALSE(loaded.has_value());
  EXPECT_EQ(loaded.error(),
            "--data-dir " + dir_ + ": volume.meta is of version 9; this mimicfs reads version 1");
  write_meta({0xa1, 0x66, 0x66, 0x6f});  // cut short
  loaded = open_store()->load_volume();
  ASSERT_FALSE(loaded.has_value());
  EXPECT_EQ(loaded.error(),
            "--data-dir " + dir_ + ": volume.meta is not a saved mimicfs volume (corrupt?)");
}

TEST_F(HostDataStoreTest, MissingOrNotADirectoryIsRefused) {
  const std::string missing = dir_ + "/nope";
  auto store = HostDataStore::open(missing);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error(), "--data-dir " + missing + ": No such file or directory");
  const std::string file = dir_ + "/plain";
  std::ofstream(file) << "x";
  store = HostDataStore::open(file);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error(), "--data-dir " + file + ": not a directory");
}

TEST_F(HostDataStoreTest, AForeignDirectoryIsRefusedAndLeftAsItWas) {
  std::ofstream(fs::path(dir_) / "notes.txt") << "mine";
  EXPECT_EQ(refusal(), "--data-dir " + dir_ +
                           ": not empty and not a mimicfs data directory (found \"notes.txt\"; "
                           "give an empty directory)");
  EXPECT_EQ(slurp(fs::path(dir_) / "notes.txt"), "mine");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "mimicfs-data"));
}

TEST_F(HostDataStoreTest, AnotherVersionOrACorruptMarkerIsRefusedAndKept) {
  std::ofstream(fs::path(dir_) / "mimicfs-data") << "mimicfs data directory 7\n";
  EXPECT_EQ(refusal(),
            "--data-dir " + dir_ + ": a mimicfs data directory of version 7; this mimicfs reads 1");
  EXPECT_EQ(slurp(fs::path(dir_) / "mimicfs-data"), "mimicfs data directory 7\n");
  std::ofstream(fs::path(dir_) / "mimicfs-data") << "\x01garbage";
  EXPECT_EQ(refusal(), "--data-dir " + dir_ + ": mimicfs-data is not a mimicfs marker (corrupt?)");
  EXPECT_EQ(slurp(fs::path(dir_) / "mimicfs-data"), "\x01garbage");
}

}  // namespace
}  // namespace mimicfs
