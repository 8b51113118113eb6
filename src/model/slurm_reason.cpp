#include "model/slurm_reason.hpp"

#include "core/text.hpp"

namespace gpudx {

namespace {

std::string joined(const SlurmReason& r) {
    std::string text = std::string(kSlurmReasonPrefix) + " " + r.finding;
    if (!r.rest.empty()) text += " " + r.rest;
    return text;
}

}  // namespace

bool SlurmReason::fits() const { return joined(*this).size() <= kSlurmReasonMaxBytes; }

std::string SlurmReason::format() const {
    std::string ascii;
    for (char c : joined(*this)) {
        auto u = static_cast<unsigned char>(c);
        ascii += (u < 0x20 || u >= 0x7f) ? '?' : c;
    }
    if (ascii.size() > kSlurmReasonMaxBytes) ascii = ascii.substr(0, kSlurmReasonMaxBytes - 3) + "...";
    return ascii;
}

std::optional<SlurmReason> SlurmReason::parse(std::string_view text) {
    if (!text.starts_with(kSlurmReasonPrefix)) return std::nullopt;
    std::string_view after = trim(text.substr(kSlurmReasonPrefix.size()));
    SlurmReason r;
    auto end = after.find_first_of(" \t");
    r.finding = std::string(after.substr(0, end));
    if (end != std::string_view::npos) r.rest = std::string(trim(after.substr(end)));
    return r;
}

}  // namespace gpudx
