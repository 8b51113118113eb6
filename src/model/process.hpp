#pragma once
// One process's view of the GPU stack (`gpudx diagnose --pid`), read from the host through /proc/PID without
// entering its namespaces: what it has mapped, what its loader would pick next inside its own root, its
// environment and container, the device nodes of its mount namespace and the GPUs it holds open.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/named_enum.hpp"
#include "model/collector_status.hpp"
#include "model/devices.hpp"
#include "model/environment.hpp"
#include "model/libraries.hpp"

namespace gpudx {

// A GPU library the process has mapped: one file of /proc/PID/maps.
struct MappedLibrary {
    std::string soname;    // the name the loader looks up: libcuda.so.1, libcudart.so.12, libnccl.so.2 ...
    std::string path;      // as the process sees it, inside its mount namespace
    std::string version;   // from the file name (libcuda.so.580.95.05 -> 580.95.05), else its contents; empty: unknown
    bool deleted = false;  // maps says "(deleted)": the file was replaced since (a driver upgrade under a running job)
    std::string version_from;  // kVersionFromName, kVersionFromContents, or empty (model/libraries.hpp)
};

// How far gpudx got reading the process: read, every file below was read; gone, it exited before or while gpudx
// read it; denied, the caller may not read it (another user's).
enum class ProcessViewState { read, gone, denied };
inline constexpr EnumName<ProcessViewState> kProcessViewStates[] = {
    {ProcessViewState::read, "read"}, {ProcessViewState::gone, "gone"}, {ProcessViewState::denied, "denied"}};
constexpr std::span<const EnumName<ProcessViewState>> enum_names(ProcessViewState) { return kProcessViewStates; }

struct ProcessView {
    int pid = 0;
    ProcessViewState state = ProcessViewState::read;
    std::string problem;  // gone or denied: the file and the reason
    std::string command;  // /proc/PID/comm
    std::optional<uint32_t> uid;
    std::string user;          // uid's name in the host's /etc/passwd; empty when unknown
    std::string slurm_job_id;  // SLURM_JOB_ID in its environment, else the job_N of its cgroup
    // Whether its mount namespace is another than gpudx's (a container's): its root and /dev are its own.
    std::optional<bool> own_mount_namespace;
    std::vector<MappedLibrary> mapped;
    LibrariesLayer libraries;       // what its loader would pick next: its LD_LIBRARY_PATH, its root's ld.so.cache
    EnvironmentLayer environment;   // its GPU variables, and its container from its cgroup and root
    std::vector<DeviceNode> device_nodes;   // GPU device nodes under /dev in its mount namespace
    std::vector<std::string> open_devices;  // GPU device files it holds open (/proc/PID/fd)
    std::vector<ReadProblem> problems;      // files that could not be read; the rest still counts
};

}  // namespace gpudx
