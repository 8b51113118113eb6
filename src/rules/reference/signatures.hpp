#pragma once
// The signature catalogue: every kernel-log line and error text gpudx recognises beyond the parser's own
// (Xid, AER, IOMMU, fallen off the bus, module signatures), as versioned data (data/signatures.toml, a copy
// compiled in, a site file over it: docs/signatures.md). A signature matches by literal templates, never a
// regular expression: "NVRM: API mismatch: the client has the version {client_version:version}, but".
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "model/finding.hpp"
#include "model/kernel_log.hpp"

namespace gpudx {

struct CheckContext;     // rules/engine/check_context.hpp
struct DiagnoseOptions;  // rules/engine/check_context.hpp

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

// The GPUs a text names with their UUIDs ("NVRM: GPU at PCI:0000:02:00: GPU-660d..."): PCI address -> UUID, read a
// kept line at a time (`gpudx explain` keeps none of its text's lines).
class GpuUuidsInText {
public:
    explicit GpuUuidsInText(const SignatureCatalogue& catalogue);
    ~GpuUuidsInText();
    GpuUuidsInText(const GpuUuidsInText&) = delete;
    GpuUuidsInText& operator=(const GpuUuidsInText&) = delete;
    void add(const KernelLogLine& line);
    const std::map<std::string, std::string>& found() const { return found_; }

private:
    struct Matcher;  // made at the first line holding "GPU-"
    const SignatureCatalogue& catalogue_;
    std::unique_ptr<Matcher> matcher_;
    std::map<std::string, std::string> found_;
};

// What the catalogue can emit, for the rule registry and docs: one entry per id.
struct SignatureDeclaration {
    std::string id;
    Layer layer;
    Severity severity;
    std::string summary;
};
std::vector<SignatureDeclaration> signature_declarations(const SignatureCatalogue& catalogue);

// Findings for the kernel log's kept lines (joined where a message spans lines, rsyslog's #012 split apart), with the
// node's facts checked where the snapshot has them; fed a kept line at a time, as check_kernel_log_text runs it. The
// lines come in the log's order and go back through `done`, in the same order, each once every signature that may
// take it has been tried (a message joined over several lines is matched when its last line has come), with whether
// one recognised it. Only the lines a joined message may still need are held, so a text streamed through it costs
// memory for its findings only.
class SignatureScan {
public:
    using Done = std::function<void(const KernelLogLine& line, bool recognised)>;
    SignatureScan(const SignatureCatalogue& catalogue, Done done);
    ~SignatureScan();
    SignatureScan(const SignatureScan&) = delete;
    SignatureScan& operator=(const SignatureScan&) = delete;
    void add(KernelLogLine line);                  // held here until done
    void add_borrowed(const KernelLogLine& line);  // the caller keeps it alive until finish()
    void finish();                                 // the text is over: every line goes to `done`
    // The findings, after finish(): one that another finding of the scan explains better is left out. `source`
    // names the log in the evidence.
    void findings(const CheckContext& ctx, const std::string& source, std::vector<Finding>& out) const;

private:
    struct State;
    std::unique_ptr<State> state_;
};
// An NVRM, amdgpu or kfd line that, when no signature recognised it, is listed as unrecognised (a line the parser's
// own rules explain is not).
bool is_unrecognised_driver_line(const KernelLogLine& line);
// The rules of the kernel-log family that read the kept lines, fed a line at a time: the catalogue's signatures,
// on the lines none recognised the libraries' result codes, on the lines neither explained a GPU component's failure
// line; and the lockdown line the module-signature rule cites, and the Xid events' times the repeats slide over.
// diagnose feeds the snapshot's kept lines; `gpudx explain` feeds the scanner's lines as they come and keeps none of
// them (its memory flat in the text's size).
class KernelLogLineRules {
public:
    // The catalogue and tables `options` names must outlive it. `list_unrecognised`: keep the driver lines no
    // signature recognised (`gpudx explain` lists them).
    KernelLogLineRules(const DiagnoseOptions& options, bool list_unrecognised);
    ~KernelLogLineRules();
    KernelLogLineRules(const KernelLogLineRules&) = delete;
    KernelLogLineRules& operator=(const KernelLogLineRules&) = delete;
    void add(KernelLogLine line);
    void add_borrowed(const KernelLogLine& line);  // the caller keeps it alive until finish()
    // The kept Xid events (KernelLog::xids), for the repeats; the caller keeps each alive until the rules are done.
    void add_borrowed_xid(const XidEvent& event);
    void finish();                                 // the text is over

    struct State;  // rules/families/kernel_log.cpp

private:
    friend void check_kernel_log_text(const CheckContext&, std::vector<Finding>&, std::vector<std::string>*,
                                      KernelLogLineRules*);
    std::unique_ptr<State> state_;
};
// The whole kernel-log rule family (rules/families/kernel_log.cpp: the parser's events, then the catalogue), as
// `gpudx diagnose` runs it; `gpudx explain` also asks for the unrecognised lines. `lines`: the line rules already
// fed and finished (explain streams its text through them); null: they are fed the snapshot's kept lines here.
void check_kernel_log_text(const CheckContext& ctx, std::vector<Finding>& out, std::vector<std::string>* unrecognised,
                           KernelLogLineRules* lines = nullptr);
// Every word the kernel-log scanner must keep lines for so that check_kernel_log_text sees them: the catalogue's
// gates, the result codes' words and the fallback's components (KernelLogScanOptions::extra_words).
std::vector<std::string> kernel_log_text_words(const SignatureCatalogue& catalogue);

}  // namespace gpudx
