#pragma once
// Writing a report where the user asked (`-o FILE`) without ever damaging what is there
// (docs/reliability.md, "Files gpudx writes"):
//  - a regular file, or a name that does not exist yet, is replaced atomically: a reader (node_exporter's
//    textfile collector, a health checker) sees the old content or the new, never a part;
//  - a symbolic link keeps pointing where it did; what it finally names is written by these same rules;
//  - a character or block device, a FIFO or a socket is written in place: never unlinked, never renamed over
//    (`-o /dev/null` as root once replaced the device node with a regular file);
//  - the process's own descriptors (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N) are written
//    through the descriptor, at its offset, as the shell set it up.
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace gpudx {

Result<void> write_output_file(const std::string& path, std::string_view text);

// The descriptor a path names when it is one of the process's own (/dev/stdout, /dev/fd/3, ...).
std::optional<int> own_descriptor_path(std::string_view path);

}  // namespace gpudx
