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
// LD_LIBRARY_PATH, by the node's collectors. Never throws: a process the caller may not read is denied, one that
// exits before or during the read gone (ProcessViewState), each with the file and the reason.
//
// `node`: what gpudx read of the node itself (its loader view, the environment it read it with, its device nodes).
// A process in gpudx's own mount namespace and root sees the same files, so with the same LD_LIBRARY_PATH its
// loader view is the node's, and its /dev is: taken as they are instead of read again.
struct NodeView {
    const LibrariesLayer* libraries = nullptr;
    const std::map<std::string, std::string>* environment = nullptr;
    const std::vector<DeviceNode>* device_nodes = nullptr;
};
ProcessView collect_process(const Root& root, int pid, const NodeView& node = {});

// The GPU libraries in /proc/PID/maps text, each file once, in the order first mapped.
std::vector<MappedLibrary> parse_proc_maps(std::string_view text);
// NUL-separated NAME=VALUE entries of /proc/PID/environ (the first of a repeated name wins, as getenv does).
std::map<std::string, std::string> parse_proc_environ(std::string_view text);

}  // namespace gpudx
