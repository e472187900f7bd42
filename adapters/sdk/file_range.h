#pragma once

// Reading a replica's log file from an offset: what a backend whose scheduler writes
// output to files (the local adapter, Slurm) needs for Backend::ReadLog.

#include <cstdint>
#include <fstream>
#include <string>

namespace jc::adapter {

// Up to `max_bytes` of `path` from `offset`; empty when the file is not there yet or
// the offset is at or past its end.
inline std::string ReadFileRange(const std::string& path, int64_t offset, int64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in || max_bytes <= 0) return std::string();
  in.seekg(offset);
  std::string data(static_cast<size_t>(max_bytes), '\0');
  in.read(data.data(), max_bytes);
  data.resize(static_cast<size_t>(in.gcount()));
  return data;
}

}  // namespace jc::adapter
