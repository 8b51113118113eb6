#pragma once
// libkmod opened with dlopen("libkmod.so.2") and declared here by hand: the binary must run on nodes
// (and in containers) that do not have it, and libkmod is what reads compressed and signed module files.
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

struct kmod_ctx;

namespace gpudx {

using ModinfoFields = std::vector<std::pair<std::string, std::string>>;

class KmodContext {
public:
    // A context over one module directory (<root>/lib/modules/<release> as a host path), with no
    // modprobe configuration read. Fails when libkmod.so.2 cannot be loaded or kmod_new refuses.
    static Result<KmodContext> open(const std::filesystem::path& module_dir);

    KmodContext(KmodContext&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}
    KmodContext& operator=(KmodContext&& other) noexcept;
    KmodContext(const KmodContext&) = delete;
    KmodContext& operator=(const KmodContext&) = delete;
    ~KmodContext();

    // The module file modules.dep.bin names for a module, as a host path; empty when the index is absent,
    // does not list the module, or lists it as built in.
    std::string indexed_path(std::string_view name) const;
    // Every modinfo key and value of a module file (compressed ones too), and the signer fields of an
    // appended signature, in file order.
    Result<ModinfoFields> file_info(const std::filesystem::path& host_path) const;

private:
    explicit KmodContext(kmod_ctx* ctx) : ctx_(ctx) {}
    kmod_ctx* ctx_ = nullptr;
};

// Whether libkmod.so.2 can be loaded here; why not in `why`.
bool kmod_available(std::string* why = nullptr);

}  // namespace gpudx
