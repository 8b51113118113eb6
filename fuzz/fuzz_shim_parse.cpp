// The preload shim's parsers (shim/shim_parse.hpp): bus ids, UUIDs and procfs information files, read
// inside a CUDA process on every lookup. Compiled from the shim's source (the shim links no libgpudx).
#include <cstring>

#include "fuzz.hpp"
#include "shim/shim_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx::shim;
    // Copies without a terminating NUL, so that a read past the length is an ASan report.
    std::unique_ptr<char[]> buf(new char[size ? size : 1]);
    if (size) std::memcpy(buf.get(), data, size);
    const char* text = buf.get();

    uint64_t a = parse_bus_id(text, size);
    int digits = domain_digits_of(text, size);
    FUZZ_REQUIRE(digits == 4 || digits == 8);
    if (a != kNoAddress) {
        // Written back in either spelling, it parses to the same address.
        char out[64];
        for (int d : {4, 8}) {
            size_t n = format_cuda_bus_id(a, d, out, sizeof out);
            if (n) FUZZ_REQUIRE(parse_bus_id(out, n) == a);
        }
        size_t n = format_nvml_bus_id(a, out, sizeof out);
        if (n) FUZZ_REQUIRE(parse_bus_id(out, n) == a);
        // Too small a buffer is refused, never overrun.
        char tiny[8];
        FUZZ_REQUIRE(format_cuda_bus_id(a, 4, tiny, sizeof tiny) == 0);
    }

    uint8_t uuid[16];
    if (parse_uuid(text, size, uuid)) {
        char out[48];
        format_uuid(uuid, "GPU-", out, sizeof out);
        uint8_t again[16];
        FUZZ_REQUIRE(parse_uuid(out, std::strlen(out), again) && std::memcmp(uuid, again, 16) == 0);
    }

    auto info = parse_information(text, size);
    (void)info;
    return 0;
}
