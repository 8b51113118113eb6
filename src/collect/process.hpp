#pragma once
// One process's view of the GPU stack, read from the host through /proc/PID (maps, environ, root, fd, cgroup,
// status) without entering its namespaces: `gpudx diagnose --pid`, `gpudx gather --pid` (model/process.hpp).
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/root.hpp"
#include "model/process.hpp"

namespace gpudx {

// Reads process `pid` of the node under `root` (the live machine, or a capture made by `gather --pid`). Its
// libraries and device nodes are read inside its own root (root.subroot("/proc/PID/root")), with its own
// LD_LIBRARY_PATH, by the node's collectors. Never throws: a process the caller may not read is kProcessDenied,
// one that exits before or during the read kProcessGone, each with the file and the reason.
ProcessView collect_process(const Root& root, int pid);

// The GPU libraries in /proc/PID/maps text, each file once, in the order first mapped.
std::vector<MappedLibrary> parse_proc_maps(std::string_view text);
// NUL-separated NAME=VALUE entries of /proc/PID/environ (the first of a repeated name wins, as getenv does).
std::map<std::string, std::string> parse_proc_environ(std::string_view text);

}  // namespace gpudx
