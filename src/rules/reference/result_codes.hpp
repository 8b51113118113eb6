#pragma once
// The GPU libraries' result codes as programs print them: CUDA's driver (CUresult) and runtime (cudaError_t),
// NVML (nvmlReturn_t), NCCL (ncclResult_t), HIP (hipError_t) and HSA (hsa_status_t). Each code has its name,
// number, the text the library's error-string function returns, the layer of the node it points at, a meaning
// and a next step: versioned data in data/error-codes/*.toml (its README cites the public headers and sources),
// compiled into the binary like the signature catalogue.
//
// A line is matched by a code's name ("CUDA_ERROR_SYSTEM_NOT_READY", "cudaErrorMemoryAllocation",
// "hipErrorNoBinaryForGpu"), by a CUDA code's text after what programs print before it ("CUDA error: out of
// memory", "Cuda failure 'invalid argument'"), and by a CUDA code's number where the line speaks of CUDA
// ("error 802", "(803 vs. 0)", "code=2(").
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/key_set_16.hpp"
#include "model/finding.hpp"

namespace gpudx {


struct ResultCode {
    std::string name;  // "CUDA_ERROR_SYSTEM_NOT_READY"
    long long number = 0;
    std::string text;  // the library's own string; empty where no public source confirmed it
    Layer layer = Layer::driver;
    // nullopt: a success or benign code (cudaSuccess, cudaErrorNotReady), never a finding.
    std::optional<Severity> severity;
    // The code says the program itself erred (an invalid argument, a bad handle), not the node: its finding is
    // a warning at most, so a pasted traceback of a program's bug does not fail a node.
    bool program_error = false;
    std::string meaning, next_step;
    std::vector<std::string> aliases;  // other spellings programs print
    int line = 0;                      // where it is declared, for errors and --list
    std::string origin;                // a site file's path when it declared this code; empty: the table's

    bool operator==(const ResultCode&) const = default;
};

struct ResultCodeTable {
    std::string table;    // "CUresult", "cudaError_t", "nvmlReturn_t", "ncclResult_t", "hipError_t", "hsa_status_t"
    std::string version;  // "2026.12.1"
    std::string origin;   // "built-in data/error-codes/cuda-driver.toml" or a site file
    std::vector<ResultCode> codes;

    bool operator==(const ResultCodeTable&) const = default;
};

// Parses one table. Errors name "ORIGIN:LINE": a table gpudx does not know, a duplicate name or number, a layer
// or severity gpudx does not know, a key it does not know.
Result<ResultCodeTable> parse_result_code_table(std::string_view text, const std::string& origin);
// The six tables compiled into the binary (data/error-codes/).
const std::vector<ResultCodeTable>& builtin_result_code_tables();

// The finding id of a code: "cuda.CUDA_ERROR_SYSTEM_NOT_READY", "cudart.cudaErrorMemoryAllocation",
// "nvml.NVML_ERROR_DRIVER_NOT_LOADED", "nccl.ncclSystemError", "hip.hipErrorNoBinaryForGpu", "hsa.HSA_STATUS_...".
std::string result_code_id(const ResultCodeTable& table, const ResultCode& code);

struct ResultCodeMatch {
    const ResultCodeTable* table = nullptr;
    const ResultCode* code = nullptr;
    std::string how;  // "name", "text", "number"
};
// Matches lines against a set of tables: their names and texts indexed once (lower-cased texts included), so a
// scan pays it once, not per line. The tables must outlive it.
class ResultCodeMatcher {
public:
    explicit ResultCodeMatcher(const std::vector<ResultCodeTable>& tables);
    static const ResultCodeMatcher& builtin();  // over builtin_result_code_tables(), made on first use
    // The codes one line names, at most one per code.
    std::vector<ResultCodeMatch> match(std::string_view line) const;

private:
    struct CudaText {
        std::string lower;  // the code's text, lower case
        ResultCodeMatch match;
    };
    const std::vector<ResultCodeTable>* tables_;
    std::map<std::string, ResultCodeMatch, std::less<>> by_name_;
    // The first two bytes and the lengths the names have: most identifiers of a line (times, addresses, words)
    // are passed without a lookup in by_name_.
    KeySet16 name_starts_;
    size_t shortest_name_ = 0, longest_name_ = 0;
    std::vector<CudaText> cuda_texts_;  // the runtime's, then the driver API's
};
// One line against `tables` (the built-in ones' matcher is made once; other tables get one per call).
std::vector<ResultCodeMatch> match_result_codes(std::string_view line, const std::vector<ResultCodeTable>& tables);

// The built-in tables with site files over them (--error-codes FILE, in order): a site code replaces the built-in
// one of the same name, or is added. Refused with FILE:LINE: what parse_result_code_table refuses, and a code whose
// name the built-in table gives another number, or whose number it gives another name.
Result<std::vector<ResultCodeTable>> result_code_tables_with_site(const std::vector<std::string>& paths);
// The words the kernel-log scanner keeps a line for, so that program output reaches the match.
std::vector<std::string> result_code_gate_words();

// One finding per code named in the kernel log's kept lines (with its count), fed a line at a time, in the log's
// order: the lines no signature explained (a signature's wording is the closer one). The tables are read at the
// first line: a log without kept lines never reads them.
class ResultCodeScan {
public:
    // null: the built-in tables. Other tables must outlive the scan.
    explicit ResultCodeScan(const std::vector<ResultCodeTable>* tables);
    ~ResultCodeScan();
    ResultCodeScan(const ResultCodeScan&) = delete;
    ResultCodeScan& operator=(const ResultCodeScan&) = delete;
    // Whether the line names a code that makes a finding (the line is then explained).
    bool add(const std::string& text);
    void findings(const std::string& source, std::vector<Finding>& out) const;

private:
    struct Seen {
        ResultCodeMatch match;
        size_t count = 0;
        std::string first, last;
    };
    const std::vector<ResultCodeTable>* tables_;
    std::unique_ptr<ResultCodeMatcher> own_;
    const ResultCodeMatcher* matcher_ = nullptr;
    std::vector<Seen> seen_;
    std::string last_text_;  // the previous line (empty: none) and the codes with a finding it named
    std::vector<ResultCodeMatch> last_matches_;
};

}  // namespace gpudx
