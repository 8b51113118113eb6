#pragma once
// The version a driver library (libcuda, libnvidia-ml) carries in its own bytes, for a copy whose file name says
// none: a `cp -L` of libcuda.so.1 into an application folder or an image is a regular file named libcuda.so.1, and
// it is exactly the copy that shadows the host's driver.
//
// Why the bytes hold it: the user-space driver hands its version string to the kernel module, which refuses a
// client of another version ("NVRM: API mismatch"), so the string sits NUL-terminated in .rodata. libcuda also
// lists older releases there (on the 1xH200 node, libcuda.so.580.159.04 holds "580.159.04" once and
// 535.54.02 ... 580.65.05 twice each, docs/device-runs/2026-12-03-h200x1-process-view), never a newer one, so the
// highest driver version found is its own. libnvidia-ml.so.580.159.04 holds exactly one, its own.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/root.hpp"

namespace gpudx {

// Where an ELF file's .rodata lies, from its headers read through read_at(offset, n) (fewer bytes at the end of the
// file); nullopt when it is not a well-formed 64-bit ELF file or has no .rodata.
struct FileRange {
    uint64_t offset = 0, size = 0;
};
using ReadAt = std::function<std::string(uint64_t offset, size_t n)>;
std::optional<FileRange> elf_rodata_range(uint64_t file_size, const ReadAt& read_at);
// The same over a file in memory: its .rodata, or the whole input when elf_rodata_range finds none.
std::string_view elf_rodata(std::string_view file);

// The highest NUL-bounded driver version ("580.159.04", "565.40": a three-digit major from 300, one to three
// digits after each dot) in `bytes`; empty when there is none.
std::string driver_version_in_bytes(std::string_view bytes);

// driver_version_in_bytes over the .rodata of the file at `path` under `root` (the whole file when it is no ELF
// file), read in 1 MiB chunks: libcuda is about 100 MB. Empty when the file cannot be read, is larger than 1 GiB or
// holds no version. The version found is handed to root.note_excerpt, so a capture keeps it. Each file is read
// once per gpudx process (remembered by device, inode, size and mtime: a rewritten file is read again).
std::string driver_version_in_file(const Root& root, std::string_view path);

}  // namespace gpudx
