// Node-record JSON (`gpudx baseline`, model/node_record.hpp), then compared with a node and with itself.
#include "fuzz.hpp"
#include "node_record.hpp"
#include "render/records.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto j = nlohmann::json::parse(fuzz::text(data, size), nullptr, false);
    if (j.is_discarded()) return 0;
    auto r = node_record_from_json(j);
    if (!r) return 0;
    static const NodeRecord node = fuzz::h200x2_record();
    for (auto& findings : {diff_records(*r, node, "fuzz.json"), diff_records(node, *r, "fuzz.json"),
                           diff_records(*r, *r, "fuzz.json")}) {
        (void)render_findings_text(findings);
        (void)exit_code_for(findings);
    }
    // A record compared with itself never reports a missing card.
    FUZZ_REQUIRE(exit_code_for(diff_records(*r, *r, "fuzz.json")) != 1);
    (void)dominant_gpu_model(*r);
    fuzz::require_json_writable(node_record_to_json(*r));
    auto again = node_record_from_json(node_record_to_json(*r));
    FUZZ_REQUIRE(again.has_value());
    return 0;
}
