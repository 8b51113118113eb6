// /proc/modules, modules.dep, DKMS make.log headers, vermagic (collect/module.hpp).
#include "collect/module.hpp"
#include "fuzz.hpp"
#include "model/layer_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);

    ModuleLayer layer;
    for (auto& m : parse_proc_modules(in))
        if (is_gpu_related_module(m.name)) layer.loaded.push_back(m);
    (void)find_in_modules_dep(in, "nvidia");
    (void)find_in_modules_dep(in, "nvidia_uvm");
    (void)vermagic_release(in);
    auto [first, rest] = fuzz::split2(in);
    (void)is_module_file_for(first, rest);
    (void)parse_dkms_make_log_header(in);
    nlohmann::json j;
    layer_to_json(j, layer);
    fuzz::require_printable(j);
    return 0;
}
