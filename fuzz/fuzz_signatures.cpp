// The signature catalogue TOML (rules/reference/signatures.hpp) and its templates: a site file is refused with its
// file name, or parses into signatures whose own examples match; any text matched against the built-in
// catalogue yields fields that print; the fallback reads any line without fault, and an address it names is one.
#include "core/pci_address.hpp"
#include "rules/reference/component_lines.hpp"
#include "rules/reference/signatures.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);
    auto c = parse_signature_catalogue(in, "fuzz.toml");
    if (!c) {
        // Errors name the file, so an operator can find the line.
        FUZZ_REQUIRE(c.error().message.find("fuzz.toml") != std::string::npos);
    } else {
        for (auto& s : c->signatures)
            for (auto& ex : s.examples) FUZZ_REQUIRE(match_signature(s, ex).has_value());
        (void)catalogue_gate_words(*c);
        (void)signature_declarations(*c);
    }
    nlohmann::json j = nlohmann::json::array();
    for (auto& s : builtin_signature_catalogue().signatures)
        if (auto m = match_signature(s, in))
            for (auto& [k, v] : m->fields) j.push_back({s.id, k, v});
    fuzz::require_printable(j);
    if (auto line = component_failure_line(in)) {
        FUZZ_REQUIRE(!line->component.empty() && !line->word.empty());
        FUZZ_REQUIRE(line->pci.empty() || PciAddress::parse(line->pci).has_value());
    }
    return 0;
}
