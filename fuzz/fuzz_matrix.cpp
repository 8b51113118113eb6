// The compatibility matrix TOML (rules/comparisons/matrix.hpp), parsed and then held against a node: classification and
// every glob in the tested set run on what was parsed.
#include "fuzz.hpp"
#include "node_record.hpp"
#include "rules/comparisons/matrix.hpp"
#include "render/records.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto m = parse_matrix(fuzz::text(data, size), "fuzz.toml");
    if (!m) {
        FUZZ_REQUIRE(m.error().message.starts_with("fuzz.toml"));
        return 0;
    }
    static const NodeRecord node = fuzz::h200x2_record();
    NodeRecord other = node;
    other.hostname = "h100-0042";
    other.gpus.resize(1);
    for (const NodeRecord* n : {&node, static_cast<const NodeRecord*>(&other)}) {
        auto c = check_node_against_matrix(*m, *n, CalendarDate{2026, 11, 30});
        (void)render_matrix_check_text(*m, *n, c);
        fuzz::require_json_writable(matrix_check_to_json(*m, *n, c));
    }
    for (auto& cls : m->classes) (void)cls.review_by.str();
    return 0;
}
