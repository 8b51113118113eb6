// /proc/driver/nvidia: gpus/<addr>/information and version (collect/module.hpp).
#include "collect/module.hpp"
#include "core/pci_address.hpp"
#include "fuzz.hpp"
#include "model/layer_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);
    // The directory name is a second input: the first line when the input has one.
    auto [first, rest] = fuzz::split2(in);

    ModuleLayer layer;
    layer.nvidia_gpus.push_back(parse_nvidia_gpu_information(in, "0000:00:06.0"));
    layer.nvidia_gpus.push_back(parse_nvidia_gpu_information(rest, first));
    for (auto& g : layer.nvidia_gpus)
        if (!g.address.empty()) FUZZ_REQUIRE(normalize_pci(g.address) == g.address);
    if (auto v = parse_nvidia_version(in)) {
        FUZZ_REQUIRE(!v->empty() && v->find_first_not_of("0123456789.") == std::string::npos);
        layer.nvidia_driver_version = *v;
    }
    nlohmann::json j;
    layer_to_json(j, layer);
    fuzz::require_printable(j);
    return 0;
}
