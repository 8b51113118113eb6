#pragma once
// What the driver probes share (they run in forked probe children, core/child_probe.hpp): sending the layer
// as it fills, reading the libraries' fixed-size strings, and one device's calls as the NVML and ROCm SMI
// probes make them.
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/child_probe.hpp"
#include "core/text.hpp"
#include "model/driver.hpp"
#include "model/layer_json.hpp"

namespace gpudx {

// The layer so far, as the probe's result: a later one replaces it, so a hang keeps what was already read.
template <class Layer>
void send_layer(ProbeChannel& ch, const Layer& layer) {
    nlohmann::json j;
    layer_to_json(j, layer);
    ch.result(j);
}

// A string the library wrote into a buffer of `size` bytes, NUL-terminated or not, made valid UTF-8.
inline std::string library_string(const char* buf, size_t size) {
    return sanitize_utf8(std::string_view(buf, strnlen(buf, size)));
}

// One device's calls: each announced on the channel first (so a hang names it), Not Supported filed as an
// answer in `unsupported`, any other failure in `errors`. `Library` says what its return codes mean:
//   using Api; using Code; static constexpr std::string_view name; static bool succeeded(Code);
//   static bool unsupported(Code);   and Api::describe(Code).
template <class Library, class Channel>
class DeviceCalls {
public:
    using Code = typename Library::Code;

    DeviceCalls(const typename Library::Api& api, Channel& ch, unsigned index, std::vector<std::string>& unsupported,
                std::vector<std::string>& errors)
        : api_(api), ch_(ch), index_(index), unsupported_(unsupported), errors_(errors) {}

    // Announces `call` on this device, makes it and files a failure; true when it succeeded. `absent` is a code
    // that means "nothing there" rather than a failure (an empty MIG slot).
    template <class Fn>
    bool ask(const char* call, bool available, Fn&& fn, std::optional<Code> absent = std::nullopt) {
        if (!available) {
            not_in_library(call);
            return false;
        }
        announce(call);
        Code rc = fn();
        if (absent && rc == *absent) return false;
        return file(call, rc);
    }

    void announce(std::string_view call, std::string_view arguments = {}) {
        ch_.progress(driver_call_label(call, index_, arguments));
    }
    // The answer of a call made by hand, filed under `recorded_as`; true when it succeeded.
    bool file(std::string_view recorded_as, Code rc) {
        if (Library::succeeded(rc)) return true;
        if (Library::unsupported(rc)) unsupported_.emplace_back(recorded_as);
        else errors_.push_back(fmt::format("{}: {}", recorded_as, api_.describe(rc)));
        return false;
    }
    void not_in_library(std::string_view call) {
        unsupported_.push_back(fmt::format("{} (not in this {})", call, Library::name));
    }

    Channel& channel() { return ch_; }

private:
    const typename Library::Api& api_;
    Channel& ch_;
    unsigned index_;
    std::vector<std::string>& unsupported_;
    std::vector<std::string>& errors_;
};

}  // namespace gpudx
