// Acceptance records (model/accept.hpp) as `gpudx accept --compare` reads them: saved runs, possibly edited.
#include "fuzz.hpp"
#include "actions/accept.hpp"
#include "render/accept.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto j = nlohmann::json::parse(fuzz::text(data, size), nullptr, false);
    if (j.is_discarded()) return 0;
    auto r = accept_report_from_json(j);
    if (!r) return 0;
    (void)render_accept_text(*r, false, true);
    (void)render_accept_comparison(compare_accept_reports(*r, *r));
    fuzz::require_json_writable(accept_report_to_json(*r));
    return 0;
}
