#pragma once
#include <optional>
#include <string>
#include <vector>

namespace gpudx {

// One copy of a library found on the loader's search path.
struct LibraryCopy {
    std::string path;
    std::string real_path;  // after links
    std::string version;    // from the resolved file name, e.g. 580.159.04
    std::string found_by;   // LD_LIBRARY_PATH, ld.so.cache, default dir, other
};

struct ResolvedLibrary {
    std::string soname;  // libcuda.so.1
    std::optional<LibraryCopy> chosen;  // what the dynamic loader would load, nullopt when nothing
    std::string reason;                 // why that one wins
    std::vector<LibraryCopy> copies;    // every copy found, the chosen one included
};

struct LibrariesLayer {
    std::vector<std::string> ld_library_path;
    std::string ld_so_cache_format;  // "glibc-ld.so-1.7.0", "ld.so-1.7.0" or "" when unreadable
    std::vector<ResolvedLibrary> libraries;
    std::optional<std::string> cuda_symlink_target;  // /usr/local/cuda ->
};

}  // namespace gpudx
