#include "gpu_api/library.hpp"

#include <dlfcn.h>
#include <link.h>

namespace gpudx {

Result<DriverLibrary> DriverLibrary::open(std::string_view soname, const std::optional<std::string>& directory,
                                          std::string_view anchor) {
    std::string target = directory ? *directory + "/" + std::string(soname) : std::string(soname);
    dlerror();
    void* h = ::dlopen(target.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* why = dlerror();
        return fail(why ? why : "dlopen failed", target);
    }
    DriverLibrary lib;
    lib.handle_ = h;
    // The link map names the file the loader chose; fall back to dladdr when it holds a bare name.
    struct link_map* lm = nullptr;
    if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0] == '/') lib.path_ = lm->l_name;
    if (lib.path_.empty()) {
        Dl_info info{};
        void* any = ::dlsym(h, std::string(anchor).c_str());
        if (any && ::dladdr(any, &info) && info.dli_fname) lib.path_ = info.dli_fname;
    }
    if (lib.path_.empty()) lib.path_ = target;
    return lib;
}

void* DriverLibrary::symbol(std::string_view base, std::initializer_list<std::string_view> suffixes) const {
    if (!handle_) return nullptr;
    std::string name;
    for (auto suffix : suffixes) {
        name.assign(base);
        name.append(suffix);
        if (void* p = ::dlsym(handle_, name.c_str())) return p;
    }
    return nullptr;
}

}  // namespace gpudx
