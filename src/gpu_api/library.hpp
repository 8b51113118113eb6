#pragma once
// A vendor library opened with dlopen: which file the loader actually picked, and symbol lookup
// newest ABI version first (nvtop's approach), with optional symbols simply absent.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace gpudx {

class DriverLibrary {
public:
    // `soname` through the loader's search (LD_LIBRARY_PATH, ld.so.cache, default dirs), or DIR/soname when
    // a directory is given. `anchor` is a symbol every build of the library exports: its address names the
    // file when the loader's link map holds only a bare name. The handle is never closed: driver libraries do
    // not unload cleanly.
    static Result<DriverLibrary> open(std::string_view soname, const std::optional<std::string>& directory,
                                      std::string_view anchor);

    // The first of base+suffix that exists, in the order given; {"_v3", "_v2", ""} means newest first.
    void* symbol(std::string_view base, std::initializer_list<std::string_view> suffixes = {""}) const;
    // Fills `fn` with the newest of base+suffix this library has; null when it has none (an optional symbol).
    template <class Fn>
    void bind(Fn& fn, std::string_view base, std::initializer_list<std::string_view> suffixes = {""}) const {
        fn = reinterpret_cast<Fn>(symbol(base, suffixes));
    }
    // Absolute path of the file the loader mapped.
    const std::string& path() const { return path_; }

private:
    void* handle_ = nullptr;
    std::string path_;
};

}  // namespace gpudx
