// Bus-id strings (core/pci_address.hpp): every spelling the driver stack writes, compared parsed.
#include "core/pci_address.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);
    auto a = PciAddress::parse(in);
    std::string n = normalize_pci(in);
    if (a) {
        // The normalised form parses back to the same address and is its own normal form.
        auto again = PciAddress::parse(a->str());
        FUZZ_REQUIRE(again && *again == *a);
        FUZZ_REQUIRE(n == a->str());
        FUZZ_REQUIRE(normalize_pci(n) == n);
        FUZZ_REQUIRE(a->device <= 0x1f && a->function <= 7);
    } else {
        FUZZ_REQUIRE(n == in);
    }
    return 0;
}
