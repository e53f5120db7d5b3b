// SPDX-License-Identifier: Apache-2.0
// The conformance scripts: a fixed table that covers each rule the suite checks
// (table.cc), and random sequences from a seed (generator.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/conformance/script.h"

namespace mimicfs::conformance {

// What a script needs that some profiles refuse on purpose (as the storage they
// emulate does): it runs only where the profile has it.
struct Needs {
  bool tmpfile = false;           // O_TMPFILE (not on NFS)
  std::vector<std::string> fallocate_modes;  // "allocate", "keep_size", "punch_hole", "zero_range"
};

struct TableScript {
  Script script;
  Needs needs;
};

// Every fixed script, in a stable order, names unique.
std::vector<TableScript> fixed_table();

// What the profile under test offers, for the generator's choice of calls.
struct Features {
  bool tmpfile = true;
  std::vector<std::string> fallocate_modes;  // as Needs::fallocate_modes
};

// `count` random scripts of `length` statements each from `seed`: the same
// arguments give the same scripts.
std::vector<Script> random_scripts(uint64_t seed, int count, int length, const Features& features);

}  // namespace mimicfs::conformance
