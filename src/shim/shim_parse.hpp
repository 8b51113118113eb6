#pragma once
// Pure text helpers of the preload shim: bus ids, UUIDs, procfs information files. No I/O, no allocation,
// no libgpudx code (the shim links none of it), so they are safe on any thread and inside any call.
#include <cstddef>
#include <cstdint>

namespace gpudx::shim {

// A PCI address packed as domain<<32 | bus<<16 | device<<8 | function; kNoAddress when unknown.
inline constexpr uint64_t kNoAddress = ~0ull;

inline uint64_t pack_address(uint32_t domain, uint32_t bus, uint32_t device, uint32_t function) {
    return (uint64_t{domain} << 32) | (uint64_t{bus & 0xff} << 16) | (uint64_t{device & 0xff} << 8) | (function & 0xff);
}
inline uint32_t address_domain(uint64_t a) { return static_cast<uint32_t>(a >> 32); }
inline uint32_t address_bus(uint64_t a) { return static_cast<uint32_t>((a >> 16) & 0xff); }
inline uint32_t address_device(uint64_t a) { return static_cast<uint32_t>((a >> 8) & 0xff); }
inline uint32_t address_function(uint64_t a) { return static_cast<uint32_t>(a & 0xff); }

// Accepts every spelling the driver stack uses: CUDA "0000:00:06.0", NVML "00000000:00:06.0",
// "00:06.0", "0000:00:06", old procfs "0000.00.06.0"; either case, surrounding blanks.
uint64_t parse_bus_id(const char* text, size_t len);

// CUDA's spelling, upper case: "0000:00:06.0" (domain_digits 4, or 8 when the driver wrote 8).
// Returns the length written (without the NUL), or 0 when cap is too small.
size_t format_cuda_bus_id(uint64_t address, int domain_digits, char* out, size_t cap);
// NVML's spelling: "00000000:00:06.0".
size_t format_nvml_bus_id(uint64_t address, char* out, size_t cap);
// How many hex digits the domain field of a bus-id string has (4 or 8; 4 when it cannot tell).
int domain_digits_of(const char* text, size_t len);

// "GPU-992cb470-9027-88f4-48a9-a9a329d6978d", "MIG-…", or the bare 32 hex digits with or without dashes.
bool parse_uuid(const char* text, size_t len, uint8_t out[16]);
// prefix + canonical 8-4-4-4-12 form; out needs at least 4 + 36 + 1 bytes.
void format_uuid(const uint8_t uuid[16], const char* prefix, char* out, size_t cap);

// /proc/driver/nvidia/gpus/*/information: "GPU UUID" and "Bus Location" (either may be absent: the caller
// falls back to the directory name for the location).
struct InformationFile {
    bool has_uuid = false;
    uint8_t uuid[16] = {};
    uint64_t location = kNoAddress;
};
InformationFile parse_information(const char* text, size_t len);

}  // namespace gpudx::shim
