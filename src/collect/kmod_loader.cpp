#include "collect/kmod_loader.hpp"

#include <dlfcn.h>

#include <cstdarg>
#include <mutex>

namespace gpudx {
namespace {

// The few libkmod entry points used, with the signatures of libkmod.h (ABI stable since kmod 1).
struct kmod_module_t;
struct kmod_list_t;
using kmod_log_fn = void (*)(void* data, int priority, const char* file, int line, const char* fn, const char* format,
                             va_list args);

struct KmodApi {
    void* handle = nullptr;
    std::string error;
    kmod_ctx* (*new_ctx)(const char* dirname, const char* const* config_paths) = nullptr;
    kmod_ctx* (*unref_ctx)(kmod_ctx*) = nullptr;
    void (*set_log_fn)(kmod_ctx*, kmod_log_fn, const void*) = nullptr;
    int (*module_new_from_name)(kmod_ctx*, const char* name, kmod_module_t** mod) = nullptr;
    int (*module_new_from_path)(kmod_ctx*, const char* path, kmod_module_t** mod) = nullptr;
    kmod_module_t* (*module_unref)(kmod_module_t*) = nullptr;
    const char* (*module_get_path)(const kmod_module_t*) = nullptr;
    int (*module_get_info)(const kmod_module_t*, kmod_list_t** list) = nullptr;
    const char* (*info_get_key)(const kmod_list_t*) = nullptr;
    const char* (*info_get_value)(const kmod_list_t*) = nullptr;
    void (*info_free_list)(kmod_list_t*) = nullptr;
    kmod_list_t* (*list_next)(const kmod_list_t* list, const kmod_list_t* curr) = nullptr;
};

template <class Fn>
bool bind(KmodApi& api, Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(::dlsym(api.handle, name));
    if (!fn && api.error.empty()) api.error = std::string("libkmod.so.2 lacks ") + name;
    return fn != nullptr;
}

const KmodApi& api() {
    static KmodApi a;
    static std::once_flag once;
    std::call_once(once, [] {
        a.handle = ::dlopen("libkmod.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!a.handle) {
            const char* e = ::dlerror();
            a.error = std::string("libkmod.so.2 not available: ") + (e ? e : "dlopen failed");
            return;
        }
        // Every symbol is looked up (a braced list evaluates in order, all of it) so the error names each missing one.
        bool ok = true;
        for (bool bound : {bind(a, a.new_ctx, "kmod_new"), bind(a, a.unref_ctx, "kmod_unref"),
                           bind(a, a.module_new_from_name, "kmod_module_new_from_name"),
                           bind(a, a.module_new_from_path, "kmod_module_new_from_path"),
                           bind(a, a.module_unref, "kmod_module_unref"),
                           bind(a, a.module_get_path, "kmod_module_get_path"),
                           bind(a, a.module_get_info, "kmod_module_get_info"),
                           bind(a, a.info_get_key, "kmod_module_info_get_key"),
                           bind(a, a.info_get_value, "kmod_module_info_get_value"),
                           bind(a, a.info_free_list, "kmod_module_info_free_list"),
                           bind(a, a.list_next, "kmod_list_next")})
            ok = ok && bound;
        a.set_log_fn = reinterpret_cast<decltype(a.set_log_fn)>(::dlsym(a.handle, "kmod_set_log_fn"));  // optional
        if (!ok) {
            ::dlclose(a.handle);
            a.handle = nullptr;
        }
    });
    return a;
}

// libkmod prints its errors on stderr by default; gpudx reports them itself.
void quiet_log(void*, int, const char*, int, const char*, const char*, va_list) {}

}  // namespace

bool kmod_available(std::string* why) {
    const auto& a = api();
    if (!a.handle && why) *why = a.error;
    return a.handle != nullptr;
}

Result<KmodContext> KmodContext::open(const std::filesystem::path& module_dir) {
    const auto& a = api();
    if (!a.handle) return fail(a.error, "libkmod.so.2");
    // An empty configuration list: the node's modprobe.d must not change which file a name maps to here.
    const char* no_config[] = {nullptr};
    kmod_ctx* ctx = a.new_ctx(module_dir.c_str(), no_config);
    if (!ctx) return fail("kmod_new failed", module_dir.string());
    if (a.set_log_fn) a.set_log_fn(ctx, quiet_log, nullptr);
    return KmodContext(ctx);
}

KmodContext& KmodContext::operator=(KmodContext&& other) noexcept {
    if (this != &other) {
        if (ctx_) api().unref_ctx(ctx_);
        ctx_ = std::exchange(other.ctx_, nullptr);
    }
    return *this;
}

KmodContext::~KmodContext() {
    if (ctx_) api().unref_ctx(ctx_);
}

std::string KmodContext::indexed_path(std::string_view name) const {
    const auto& a = api();
    if (!ctx_) return {};
    kmod_module_t* mod = nullptr;
    std::string n(name);
    if (a.module_new_from_name(ctx_, n.c_str(), &mod) < 0 || !mod) return {};
    const char* p = a.module_get_path(mod);
    std::string out = p ? p : "";
    a.module_unref(mod);
    return out;
}

Result<ModinfoFields> KmodContext::file_info(const std::filesystem::path& host_path) const {
    const auto& a = api();
    if (!ctx_) return fail("no libkmod context", host_path.string());
    kmod_module_t* mod = nullptr;
    int rc = a.module_new_from_path(ctx_, host_path.c_str(), &mod);
    if (rc < 0 || !mod) return fail("libkmod cannot open module file", host_path.string(), -rc);
    kmod_list_t* list = nullptr;
    rc = a.module_get_info(mod, &list);
    if (rc < 0) {
        a.module_unref(mod);
        return fail("libkmod cannot read modinfo (not a module, or an unsupported compression)", host_path.string(), -rc);
    }
    ModinfoFields out;
    for (const kmod_list_t* e = list; e; e = a.list_next(list, e)) {
        const char* k = a.info_get_key(e);
        const char* v = a.info_get_value(e);
        out.emplace_back(k ? k : "", v ? v : "");
    }
    a.info_free_list(list);
    a.module_unref(mod);
    return out;
}

}  // namespace gpudx
