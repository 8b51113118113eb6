#pragma once
// The signature catalogue: every kernel-log line and error text gpudx recognises beyond the parser's own
// (Xid, AER, IOMMU, fallen off the bus, module signatures), as versioned data (data/signatures.toml, a copy
// compiled in, a site file over it: docs/signatures.md). A signature matches by literal templates, never a
// regular expression: "NVRM: API mismatch: the client has the version {client_version:version}, but".
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "model/finding.hpp"
#include "model/kernel_log.hpp"

namespace gpudx {

struct CheckContext;  // rules/engine/check_context.hpp

// What a {name:type} field reads: version "570.144" (digits and dots), int "-22", hex "0x61" or "61",
// pci "0000:07:00.0" (normalised; "0000:07:00" too), name (letters, digits, _ - . + /), text (everything up to
// the next literal, or to the end), cuda_version (a CUDA version as the driver API encodes it, 1000 * major +
// 10 * minor: "11040" reads as "11.4", "9000" as "9.0"), and the unnamed {...} that skips up to the next literal.
enum class FieldType { version, integer, hex, pci, name, text, cuda_version, skip };

struct TemplatePart {
    bool literal = true;
    std::string text;   // literal: blanks in it match any run of blanks
    std::string field;  // field: its name
    FieldType type = FieldType::text;

    bool operator==(const TemplatePart&) const = default;
};

struct SignatureTemplate {
    std::string source;  // as written in the catalogue
    std::vector<TemplatePart> parts;
    std::string gate;  // its first literal: what the kernel-log prefilter looks for

    bool operator==(const SignatureTemplate&) const = default;
};

struct Signature {
    std::string id;  // a finding id: "module.api_mismatch"
    Layer layer = Layer::kernel_log;
    std::optional<Severity> severity;  // nullopt: "ignore", a line known to be harmless (no finding)
    std::string vendor;                // nvidia, amd, any
    std::string summary;               // one line, for --list and the rule declarations
    std::string meaning;
    std::string message;    // the finding's message, {field} replaced by what the text said, {gpu} by the GPU
    std::string next_step;  // {field} and {gpu} replaced the same way
    std::vector<SignatureTemplate> templates;  // the first that matches wins
    std::vector<std::string> unless;           // literals that, present, mean it is not this signature
    unsigned lines = 1;                        // a message over several lines ("NVRM: " continuations) is joined
    std::vector<std::string> group_by;         // fields that separate findings; default: pci when captured
    std::vector<std::string> suppressed_by;    // ids whose finding for the same GPU makes this one redundant
    std::string check;                         // a node check by name: api_mismatch, cuda_driver, xid_cause
    std::vector<std::string> examples;         // real lines it must match (a unit test runs them)
    std::string origin;                        // "built-in" or the site file

    bool operator==(const Signature&) const = default;
};

struct SignatureCatalogue {
    std::string version;  // "2026.11.1", or "site 3 (FILE) over built-in 2026.11.1"
    std::vector<Signature> signatures;

    bool operator==(const SignatureCatalogue&) const = default;
};

struct SignatureMatch {
    std::map<std::string, std::string> fields;
};

// Compiled in: data/signatures.toml as the build parsed it (rules/reference/catalogue_blob.hpp), read on first use.
const SignatureCatalogue& builtin_signature_catalogue();
// Parses a catalogue; errors name "ORIGIN:LINE". A template that does not start with a literal of at least
// four characters, an unknown field type, a severity, layer or key gpudx does not know, and an example that
// its own templates do not match are errors.
Result<SignatureCatalogue> parse_signature_catalogue(std::string_view text, const std::string& origin);
// A site file: its signatures replace built-in ones of the same id and are added after the others.
Result<SignatureCatalogue> load_signature_catalogue_file(const std::string& path);

std::optional<SignatureMatch> match_signature(const Signature& sig, std::string_view text);
// The literal words the kernel-log scanner keeps lines for (KernelLogScanOptions::extra_words).
std::vector<std::string> catalogue_gate_words(const SignatureCatalogue& catalogue);

// The GPUs a text names with their UUIDs ("NVRM: GPU at PCI:0000:02:00: GPU-660d..."): PCI address -> UUID.
std::map<std::string, std::string> gpu_uuids_in_text(const KernelLog& log, const SignatureCatalogue& catalogue);

// What the catalogue can emit, for the rule registry and docs: one entry per id.
struct SignatureDeclaration {
    std::string id;
    Layer layer;
    Severity severity;
    std::string summary;
};
std::vector<SignatureDeclaration> signature_declarations(const SignatureCatalogue& catalogue);

// Findings for the kernel log's kept lines (joined where a message spans lines), with the node's facts
// checked where the snapshot has them. `unrecognised` (optional) receives the NVRM, amdgpu and kfd lines that
// neither a signature nor the parser's own rules explained.
// `explained` (optional) receives, per kept line, whether a signature matched it.
void check_signatures(const CheckContext& ctx, const SignatureCatalogue& catalogue, std::vector<Finding>& out,
                      std::vector<std::string>* unrecognised = nullptr, std::vector<bool>* explained = nullptr);
// The whole kernel-log rule family (rules/families/kernel_log.cpp: the parser's events, then the catalogue), as
// `gpudx diagnose` runs it; `gpudx explain` also asks for the unrecognised lines.
void check_kernel_log_text(const CheckContext& ctx, std::vector<Finding>& out, std::vector<std::string>* unrecognised);
// Every word the kernel-log scanner must keep lines for so that check_kernel_log_text sees them: the catalogue's
// gates, the result codes' words and the fallback's components (KernelLogScanOptions::extra_words).
std::vector<std::string> kernel_log_text_words(const SignatureCatalogue& catalogue);

}  // namespace gpudx
