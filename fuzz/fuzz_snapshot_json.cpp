// Snapshot JSON (model/snapshot.hpp) as `--from` reads it, then diagnosed and rendered in every format:
// a saved snapshot is input from another machine, and no field of it may crash a check.
#include "rules/comparisons/baseline.hpp"
#include "rules/engine/diagnose.hpp"
#include "fuzz.hpp"
#include "render/formats.hpp"
#include "render/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto j = nlohmann::json::parse(fuzz::text(data, size), nullptr, false);
    if (j.is_discarded()) return 0;
    auto s = snapshot_from_json(j);
    if (!s) return 0;
    DiagnoseOptions o;
    o.expect_gpus = 2;
    auto d = diagnose(*s, o);
    fuzz::require_json_writable(snapshot_to_json(*s));
    fuzz::require_json_writable(diagnosis_to_json(*s, d));
    (void)render_diagnosis_text(*s, d, RenderOptions{false, true});
    (void)render_snapshot_text(*s);
    (void)render_prometheus(*s, d, {.node = make_node_record(*s)});
    if (auto reason = slurm_reason(d)) FUZZ_REQUIRE(reason->format().size() <= kSlurmReasonMaxBytes);
    (void)node_problem_detector(d);
    (void)nagios(*s, d);
    // What was written reads back the same.
    auto again = snapshot_from_json(snapshot_to_json(*s));
    FUZZ_REQUIRE(again.has_value());
    FUZZ_REQUIRE(snapshot_to_json(*again) == snapshot_to_json(*s));
    return 0;
}
