// Reads a benchmark input file whole. A name ending in ".xz" is decompressed by the `xz` program
// (Debian xz-utils, already a build dependency), which keeps liblzma out of the link.
#pragma once

#include <string>

namespace inflight::bench {

// Throws Error(kNotFound) for a missing file and Error(kInvalidFile) when xz fails.
std::string read_input_file(const std::string& path);

}  // namespace inflight::bench
