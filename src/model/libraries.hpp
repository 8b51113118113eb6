#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudx {

inline constexpr std::string_view kVersionFromName = "name";
inline constexpr std::string_view kVersionFromContents = "contents";

// One copy of a library found on the loader's search path.
struct LibraryCopy {
    std::string path;       // where the loader would open it, e.g. /usr/local/nvidia/lib64/libcuda.so.1
    std::string real_path;  // after links, inside the root
    std::string version;    // from the resolved file name, e.g. 580.159.04; empty when unknown
    // How it was found first: LD_LIBRARY_PATH, ld.so.cache, default dir, ld.so.conf dir, cuda dir, compat dir, other
    std::string found_by;
    bool present = true;    // false: named by the cache but the file is not under the root (a capture without it)
    // Where version came from: kVersionFromName, kVersionFromContents (a driver library whose name carries none,
    // collect/library_version.hpp), or empty when unknown.
    std::string version_from;
};

// The user-space driver's own libraries, whose version must be the kernel module's.
inline bool is_driver_library(std::string_view soname) { return soname == "libcuda.so.1" || soname == "libnvidia-ml.so.1"; }

// A copy's version as findings write it: "580.159.04", "580.159.04 by its contents" or "version unknown".
inline std::string version_shown(const std::string& version, std::string_view version_from) {
    if (version.empty()) return "version unknown";
    return version_from == kVersionFromContents ? version + " by its contents" : version;
}
inline std::string version_shown(const LibraryCopy& c) { return version_shown(c.version, c.version_from); }

// A CUDA toolkit link-time stub (`/usr/local/cuda/lib64/stubs/libcuda.so`, `.../targets/x86_64-linux/lib/stubs/`):
// it lets a build link against libcuda or NVML without a driver, and at run time it has no driver behind it
// (cuInit returns CUDA_ERROR_STUB_LIBRARY). ldconfig gives it a libcuda.so.1 link as soon as its folder is on
// ld.so.conf, and an image that puts the folder on LD_LIBRARY_PATH hands it to every job.
inline bool is_toolkit_stub(std::string_view path) { return path.find("/stubs/") != std::string_view::npos; }

struct ResolvedLibrary {
    std::string soname;  // libcuda.so.1, libcudart.so.12 ...
    std::optional<LibraryCopy> chosen;  // what the dynamic loader would load, nullopt when nothing
    std::string reason;                 // why that one wins
    std::vector<LibraryCopy> copies;    // every copy found, the chosen one included
};

// A ROCm installation under /opt: /opt/rocm-<release>, and /opt/rocm (normally a link to one of them).
struct RocmInstall {
    std::string path;       // /opt/rocm-6.2.0
    std::string real_path;  // after links, inside the root
    std::string version;    // <path>/.info/version, e.g. 6.2.0-66; empty when unreadable
};

struct LibrariesLayer {
    std::vector<std::string> ld_library_path;
    // "glibc-ld.so.cache1.1", "ld.so-1.7.0", "ld.so-1.7.0+glibc-ld.so.cache1.1", "ldconfig -p" (from a capture's
    // _commands/ldconfig-p.txt), or "" when no cache could be read
    std::string ld_so_cache_format;
    std::string ld_so_cache_source;           // the file the cache was read from
    std::vector<std::string> ld_so_conf_dirs;  // from /etc/ld.so.conf and its includes, in order
    std::vector<ResolvedLibrary> libraries;
    std::optional<std::string> cuda_symlink_target;  // /usr/local/cuda ->
    std::vector<RocmInstall> rocm_installs;          // /opt/rocm and /opt/rocm-*, by path
    std::string rocm_release;  // the default ROCm's .info/version (/opt/rocm, else the only install); empty: none
};

}  // namespace gpudx
