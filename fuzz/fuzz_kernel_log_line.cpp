// One kernel-log line as each format reads it, and what gpudx takes from a message: topic, Xid, events,
// PCI address; and the --since forms (collect/kernel_log_parse.hpp).
#include "collect/kernel_log_parse.hpp"
#include "core/pci_address.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);

    for (int f = 0; f <= static_cast<int>(KernelLogFormat::unknown); ++f) {
        auto pl = parse_log_line(in, static_cast<KernelLogFormat>(f));
        // Views into the line, never past it.
        auto inside = [&](std::string_view v) {
            return v.empty() || (v.data() >= in.data() && v.data() + v.size() <= in.data() + in.size());
        };
        FUZZ_REQUIRE(inside(pl.message));
        FUZZ_REQUIRE(inside(pl.wall_time));
    }
    (void)detect_line_format(in);
    (void)detect_log_format(in);
    (void)classify_topic(in);
    if (auto x = parse_xid(in)) {
        if (!x->pci.empty()) FUZZ_REQUIRE(normalize_pci(x->pci) == x->pci);
        fuzz::require_printable(nlohmann::json{x->process, x->text});
    }
    for (auto& e : classify_events(in)) fuzz::require_printable(nlohmann::json{name_of(e.kind), e.device, e.module});
    if (auto a = find_pci_address(in)) FUZZ_REQUIRE(PciAddress::parse(*a).has_value());

    (void)parse_since(in);
    (void)parse_wall_time(in, 2026);
    (void)parse_wall_time(in, 0);
    return 0;
}
