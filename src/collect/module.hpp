#pragma once
// Pure parsers behind collect_module (collectors.hpp), exposed for unit tests.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collect/kmod_loader.hpp"
#include "core/root.hpp"
#include "model/collector_status.hpp"
#include "model/module.hpp"

namespace gpudx {

// Every line of /proc/modules ("name size refs deps state addr (taint)"); malformed lines skipped.
std::vector<LoadedModule> parse_proc_modules(std::string_view text);
// Modules that belong to the GPU stack (nvidia*, amdgpu, nouveau, drm helpers, vfio-pci ...).
bool is_gpu_related_module(std::string_view name);
// The version in /proc/driver/nvidia/version's NVRM line ("... Kernel Module for x86_64  580.159.04  Release ...").
std::optional<std::string> parse_nvidia_version(std::string_view text);
// /proc/driver/nvidia/gpus/<dir>/information; the address from the directory name, else "Bus Location".
NvidiaProcGpu parse_nvidia_gpu_information(std::string_view text, std::string_view dir_name);
// A ModuleFile from libkmod's modinfo fields.
ModuleFile module_file_from_modinfo(std::string name, std::string path, const ModinfoFields& fields);
// Kernel release a vermagic string was built for ("6.8.0-45-generic SMP preempt mod_unload" -> first word).
std::string vermagic_release(std::string_view vermagic);
// Whether a file name is the module's file: dashes and underscores are the same, .ko optionally compressed.
bool is_module_file_for(std::string_view file_name, std::string_view module_name);
// Relative path modules.dep (text) lists for a module, empty when it does not.
std::string find_in_modules_dep(std::string_view text, std::string_view module_name);
// "DKMS make.log for nvidia-535.104.05 for kernel 6.5.0-1-generic (x86_64)" -> {kernel, arch}.
std::pair<std::string, std::string> parse_dkms_make_log_header(std::string_view text);
// The DKMS tree under /var/lib/dkms: each built, installed or failed module build.
std::vector<DkmsEntry> read_dkms_tree(const Root& root, std::vector<ReadProblem>& problems);

}  // namespace gpudx
