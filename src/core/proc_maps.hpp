#pragma once
// /proc/PID/maps, read once for every reader of it: the GPU libraries a process has mapped (collect/process) and
// the shim and identity-caching libraries `gpudx verify` looks for (identity/verify). Pure: text in, mappings out.
#include <string_view>
#include <vector>

namespace gpudx {

// One line, "address perms offset dev inode pathname", with only what gpudx reads of it: the path.
struct ProcMapping {
    // As the process sees it (inside its mount namespace), spaces included; a pseudo-path ("[stack]", "[vdso]")
    // as the kernel writes it.
    std::string_view path;
    // The kernel's " (deleted)" suffix, removed from path: the file was replaced or removed since it was mapped
    // (a driver upgrade under a running job).
    bool deleted = false;

    // The path after its last '/'.
    std::string_view file_name() const;
};

// Each line that names a path, in order: a file mapped in several parts appears once a part. Anonymous mappings
// and lines without the five fields before the path are skipped. The views point into `text`.
std::vector<ProcMapping> parse_proc_mappings(std::string_view text);

}  // namespace gpudx
