#pragma once
// Reading a file the user named on the command line (`--kernel-log FILE`, `explain FILE`): a path of this
// host, outside any --root, and not necessarily a regular file. A pipe or a FIFO (`--kernel-log <(journalctl
// -k)`), standard input as "-" or /dev/stdin, even a socket handed over as standard input are read as they
// come: once, front to back, in chunks, since a pipe cannot be read twice nor its size known first.
#include <functional>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace gpudx {

// Whether `path` can be read so, asked before any work starts: it exists (or, "-" and /dev/stdin, /dev/fd/N,
// the descriptor is open) and is not a directory. The error names the path.
Result<void> check_user_input(const std::string& path);

// Every byte of `path`, handed to `consume` chunk by chunk as it is read. The process's own descriptors
// ("-", /dev/stdin, /dev/fd/N, /proc/self/fd/N) are read through the descriptor itself, from where the shell
// left it: reopening /proc/self/fd/0 fails for a socket (ENXIO) and starts a file over at its beginning.
Result<void> read_user_input(const std::string& path, const std::function<void(std::string_view)>& consume);

// The whole of an input file the user named (--from, --baseline, --matrix, --xid-policy, --signatures,
// --compare), read as read_user_input reads (so a pipe or "-" works too), at most `max_bytes`. A missing file, a
// directory, an unreadable or oversized one is an error whose message says why without the path (the callers
// name the file their own way) and whose `path` and `sys_errno` are set. Nothing throws: a directory opened as a
// std::ifstream once threw from inside libstdc++ on the first read, reported as gpudx's internal error.
Result<std::string> read_input_file(const std::string& path, size_t max_bytes);

}  // namespace gpudx
