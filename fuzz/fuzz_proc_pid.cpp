// Per-process procfs files: status, cgroup, stat, environ, maps (collect/proc_cgroup.hpp, collect/process.hpp,
// core/proc_maps.hpp, identity/verify.hpp, actions/checkpoint.hpp).
#include "collect/proc_cgroup.hpp"
#include "collect/process.hpp"
#include "fuzz.hpp"
#include "actions/checkpoint.hpp"
#include "core/proc_maps.hpp"
#include "identity/verify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);

    auto st = parse_proc_status(in);
    (void)parse_status_uid(in);
    (void)parse_nspid(in);
    (void)parse_status_uids(in);
    (void)parse_start_ticks(in);
    (void)environ_value(in, "CUDA_VISIBLE_DEVICES");
    // Every mapping's path is a non-empty part of the input, without the suffix its flag stands for.
    for (const auto& m : parse_proc_mappings(in)) {
        FUZZ_REQUIRE(!m.path.empty() && m.path.data() >= in.data() && m.path.data() + m.path.size() <= in.data() + in.size());
        FUZZ_REQUIRE(!m.deleted || m.path.data()[m.path.size()] == ' ');
    }
    (void)parse_proc_maps(in);
    (void)shim_mapping(in);
    (void)identity_caching_libraries(in);

    auto lines = parse_proc_cgroup(in);
    auto path = primary_cgroup_path(lines);
    auto where = cgroup_directory(lines);
    auto owner = cgroup_owner(path);
    (void)cgroup_owner(in);
    // The container id, when found, is the 64 hex digits the runtimes use.
    if (!owner.container_id.empty())
        FUZZ_REQUIRE(owner.container_id.size() == 64 &&
                     owner.container_id.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos);
    (void)st;
    (void)where;
    return 0;
}
