#pragma once
// Writing a report where the user asked (`-o FILE`) without ever damaging what is there
// (docs/reliability.md, "Files gpudx writes"):
//  - a regular file, or a name that does not exist yet, is replaced atomically: a reader (node_exporter's
//    textfile collector, a health checker) sees the old content or the new, never a part;
//  - a symbolic link keeps pointing where it did; what it finally names is written by these same rules, and
//    the replaced file keeps its mode, owner and group; a link in a sticky, world-writable directory is
//    followed only when it is the caller's or the directory owner's (the kernel's fs.protected_symlinks rule);
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

// Creates (or truncates) a file inside a directory gpudx made for itself (gather's capture) and writes `text`,
// every step checked: a full disk fails the write or the close, and the error names the file. A report the user
// named goes through write_output_file instead.
Result<void> write_whole_file(const std::string& path, std::string_view text);

// Whether a failure to write (its errno) means the output is lost or cut (a full disk, an I/O error, a closed
// descriptor: exit 74) rather than a place that cannot be written at all (no permission, a directory: 64).
bool is_write_failure(int sys_errno);

// The descriptor a path names when it is one of the process's own (/dev/stdout, /dev/fd/3, ...).
std::optional<int> own_descriptor_path(std::string_view path);

}  // namespace gpudx
