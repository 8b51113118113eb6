#include "shim/shim_parse.hpp"

#include <cstring>

namespace gpudx::shim {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void trim(const char*& text, size_t& len) {
    while (len > 0 && is_blank(*text)) ++text, --len;
    while (len > 0 && is_blank(text[len - 1])) --len;
}

}  // namespace

uint64_t parse_bus_id(const char* text, size_t len) {
    if (!text) return kNoAddress;
    trim(text, len);
    // Up to four hex fields separated by ':' or '.'; remember the separators to tell the 3-field forms apart.
    uint64_t fields[4] = {};
    size_t digits[4] = {};
    char seps[3] = {};
    int n = 0;
    for (size_t i = 0; i < len; ++i) {
        char c = text[i];
        if (c == ':' || c == '.') {
            if (digits[n] == 0 || n == 3) return kNoAddress;
            seps[n] = c;
            ++n;
            continue;
        }
        int v = hex_value(c);
        if (v < 0 || digits[n] >= 8) return kNoAddress;
        fields[n] = fields[n] * 16 + static_cast<uint64_t>(v);
        ++digits[n];
    }
    if (digits[n] == 0) return kNoAddress;
    uint64_t domain = 0, bus, device, function = 0;
    if (n == 3) {
        domain = fields[0], bus = fields[1], device = fields[2], function = fields[3];
    } else if (n == 2) {
        if (seps[1] == '.' && digits[0] <= 2) {  // "bb:dd.f"
            bus = fields[0], device = fields[1], function = fields[2];
        } else {  // "dddd:bb:dd"
            domain = fields[0], bus = fields[1], device = fields[2];
        }
    } else {
        return kNoAddress;
    }
    if (domain > 0xffffffffull || bus > 0xff || device > 0x1f || function > 7) return kNoAddress;
    return pack_address(static_cast<uint32_t>(domain), static_cast<uint32_t>(bus), static_cast<uint32_t>(device),
                        static_cast<uint32_t>(function));
}

namespace {
size_t put_hex(char* out, uint64_t value, int width, bool upper) {
    const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    for (int i = width - 1; i >= 0; --i) {
        out[i] = digits[value & 0xf];
        value >>= 4;
    }
    return static_cast<size_t>(width);
}

size_t format_bus_id(uint64_t a, int domain_digits, bool upper, char* out, size_t cap) {
    // A domain above 0xffff (Intel VMD domains start at 0x10000) takes eight digits whatever the spelling
    // asked for: four would silently name another domain.
    if (address_domain(a) > 0xffff) domain_digits = 8;
    size_t need = static_cast<size_t>(domain_digits) + 8;  // ":bb:dd.f"
    if (a == kNoAddress || !out || cap < need + 1) return 0;
    char* p = out;
    p += put_hex(p, address_domain(a), domain_digits, upper);
    *p++ = ':';
    p += put_hex(p, address_bus(a), 2, upper);
    *p++ = ':';
    p += put_hex(p, address_device(a), 2, upper);
    *p++ = '.';
    p += put_hex(p, address_function(a), 1, upper);
    *p = '\0';
    return need;
}
}  // namespace

size_t format_cuda_bus_id(uint64_t address, int domain_digits, char* out, size_t cap) {
    return format_bus_id(address, domain_digits == 8 ? 8 : 4, true, out, cap);
}

size_t format_nvml_bus_id(uint64_t address, char* out, size_t cap) {
    return format_bus_id(address, 8, true, out, cap);
}

int domain_digits_of(const char* text, size_t len) {
    if (!text) return 4;
    trim(text, len);
    size_t n = 0;
    while (n < len && text[n] != ':') ++n;
    return (n == 8 && n < len) ? 8 : 4;
}

bool parse_uuid(const char* text, size_t len, uint8_t out[16]) {
    if (!text) return false;
    trim(text, len);
    if (len >= 4 && (std::memcmp(text, "GPU-", 4) == 0 || std::memcmp(text, "MIG-", 4) == 0)) text += 4, len -= 4;
    int nibbles = 0;
    uint8_t bytes[16] = {};
    for (size_t i = 0; i < len; ++i) {
        if (text[i] == '-') continue;
        int v = hex_value(text[i]);
        if (v < 0 || nibbles >= 32) return false;
        bytes[nibbles / 2] = static_cast<uint8_t>(bytes[nibbles / 2] | (v << ((nibbles % 2) ? 0 : 4)));
        ++nibbles;
    }
    if (nibbles != 32) return false;
    std::memcpy(out, bytes, 16);
    return true;
}

void format_uuid(const uint8_t uuid[16], const char* prefix, char* out, size_t cap) {
    size_t plen = prefix ? std::strlen(prefix) : 0;
    if (!out || cap < plen + 37) {
        if (out && cap) out[0] = '\0';
        return;
    }
    std::memcpy(out, prefix, plen);
    char* p = out + plen;
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
        p += put_hex(p, uuid[i], 2, false);
    }
    *p = '\0';
}

InformationFile parse_information(const char* text, size_t len) {
    InformationFile info;
    size_t pos = 0;
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n') ++end;
        const char* line = text + pos;
        size_t line_len = end - pos;
        pos = end + 1;
        const char* colon = static_cast<const char*>(std::memchr(line, ':', line_len));
        if (!colon) continue;
        const char* key = line;
        size_t key_len = static_cast<size_t>(colon - line);
        trim(key, key_len);
        const char* value = colon + 1;
        size_t value_len = line_len - static_cast<size_t>(value - line);
        trim(value, value_len);
        if (key_len == 8 && std::memcmp(key, "GPU UUID", 8) == 0) {
            info.has_uuid = parse_uuid(value, value_len, info.uuid);
        } else if (key_len == 12 && std::memcmp(key, "Bus Location", 12) == 0) {
            info.location = parse_bus_id(value, value_len);
        }
    }
    return info;
}

}  // namespace gpudx::shim
