#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/amd.hpp"

namespace gpudx {

struct LoadedModule {
    std::string name;
    uint64_t size = 0;
    std::string state;   // Live, Loading, Unloading
    std::string taint;   // "(O)", "(POE)" ...
    std::string version; // /sys/module/<name>/version when present
};

// The module file the running kernel would load, from the module directory (libkmod).
struct ModuleFile {
    std::string name;
    std::string path;
    std::string version;
    std::string vermagic;
    std::string srcversion;
    std::string signer;
    std::string found_by;  // modules.dep.bin, modules.dep, or search (not in the index: modprobe cannot find it)
    std::string error;     // why its modinfo could not be read; empty when it was
};

// /proc/driver/nvidia/gpus/<addr>/information: every field kept, the important ones parsed.
struct NvidiaProcGpu {
    std::string address;  // normalised from the directory name or Bus Location
    std::string model;
    std::string uuid;
    std::string vbios;
    std::string bus_type;
    std::optional<uint32_t> minor;
    std::string firmware;
    std::optional<bool> excluded;
    std::map<std::string, std::string> fields;
};

struct DkmsEntry {
    std::string module, version, kernel, arch, state;  // state: built, installed, failed
    std::string log;  // make.log of that build, when one is kept
};

struct ModuleLayer {
    std::string kernel_release;
    std::vector<LoadedModule> loaded;  // GPU-related modules from /proc/modules
    std::string nvidia_proc_version;   // first line of /proc/driver/nvidia/version
    std::optional<std::string> nvidia_driver_version;  // parsed from it, e.g. 580.159.04
    std::vector<NvidiaProcGpu> nvidia_gpus;
    bool nvidia_gpus_listed = false;  // /proc/driver/nvidia/gpus could be listed (absence there then means something)
    std::string module_dir;           // /lib/modules/<release>, in the root
    std::string files_unavailable;    // why module files were not examined; empty when they were
    std::vector<ModuleFile> files;  // nvidia (and amdgpu when loaded) for the running kernel
    std::vector<DkmsEntry> dkms;
    std::optional<std::string> amdgpu_version;
    std::map<std::string, std::string> amdgpu_firmware;  // "<pci>/<name>_fw_version" -> value (also in amd_gpus)
    std::vector<AmdGpu> amd_gpus;      // DRM cards of amdgpu and KFD GPU nodes, joined by PCI address (docs/amd.md)
    std::vector<KfdNode> kfd_nodes;    // /sys/class/kfd/kfd/topology/nodes/*, CPU nodes included
    bool kfd_topology_listed = false;  // the topology could be listed (absence there then means something)
};

}  // namespace gpudx
