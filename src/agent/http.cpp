#include "agent/http.hpp"

#include <malloc.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
// Only http_get uses cpp-httplib. poll(2), not select(2): select cannot watch a descriptor above 1023, and the
// agent raises its descriptor limit.
#define CPPHTTPLIB_USE_POLL
#include <httplib.h>

#include "core/release_memory.hpp"
#include "core/text.hpp"

namespace gpudx {
namespace {

using Clock = std::chrono::steady_clock;

// The most of a streamed answer made for one connection in one turn of the thread's loop.
constexpr size_t kStreamTurnBytes = 1u << 20;

// With no descriptor left even for the spare, the listener is not watched for this long (no busy loop).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

const char* reason_phrase(int status) {
    switch (status) {
        case 200: return "OK";
        case 400: return "Bad Request";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 414: return "URI Too Long";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        case 505: return "HTTP Version Not Supported";
        default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
    }
}

// How a body's end is known: its length, the chunked coding's last chunk (a body made as it is sent), or, for
// an HTTP/1.0 client of such a body, the connection's close.
enum class BodyEnd { length, chunked, close };

// Every answer says it is the whole of it: no keep-alive, no ranges.
std::string answer_head(int status, std::string_view content_type, BodyEnd end, size_t content_length,
                        const std::vector<std::pair<std::string, std::string>>& headers) {
    std::string head = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\n{}"
                                   "Connection: close\r\nAccept-Ranges: none\r\n",
                                   status, reason_phrase(status), content_type,
                                   end == BodyEnd::length    ? fmt::format("Content-Length: {}\r\n", content_length)
                                   : end == BodyEnd::chunked ? std::string("Transfer-Encoding: chunked\r\n")
                                                             : std::string());
    for (const auto& [name, value] : headers) head += name + ": " + value + "\r\n";
    head += "\r\n";
    return head;
}

// The server's own refusal, as the agent's endpoints say errors: {"error": ...}. `why` is the server's own
// text, never the client's, so it needs no escaping.
struct Refusal {
    int status = 0;
    std::string why;
    std::vector<std::pair<std::string, std::string>> headers;
};

// Makes `piece` a chunk of a chunked answer (its size line, the piece, a line end) without copying it: the size
// line is returned, to go out before the piece (Connection::out_head), and the line end is appended to the piece.
// A piece of tens of kilobytes is sent as it was made.
std::string chunk_in_place(std::string& piece) {
    std::string size_line = fmt::format("{:x}\r\n", piece.size());
    piece += "\r\n";
    return size_line;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// %XX decoded; in a query, '+' is a blank (as HTML forms and cpp-httplib's client write it). A '%' not followed
// by two hex digits is kept as it is.
std::string percent_decode(std::string_view s, bool plus_is_blank) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        } else if (s[i] == '+' && plus_is_blank) {
            out += ' ';
        } else {
            out += s[i];
        }
    }
    return out;
}

// Where the head ends (past its blank line), or npos. Bare "\n" line ends are taken too.
size_t head_end(std::string_view in) {
    for (size_t i = in.find('\n'); i != std::string_view::npos; i = in.find('\n', i + 1)) {
        if (i + 1 < in.size() && in[i + 1] == '\n') return i + 2;
        if (i + 2 < in.size() && in[i + 1] == '\r' && in[i + 2] == '\n') return i + 3;
    }
    return std::string_view::npos;
}

struct ParsedRequest {
    std::optional<Refusal> refusal;
    bool head_only = false;  // HEAD: the answer's head alone
    bool http10 = false;     // an HTTP/1.0 client knows no chunked coding: a streamed body ends with the connection
    HttpRequest request;
};

// The request line of a complete head: METHOD SP TARGET SP HTTP/1.x. The header lines are not read: nothing
// the agent answers depends on them (a Range is ignored, so every answer is a whole 200).
ParsedRequest parse_request(std::string_view head, const HttpServerLimits& limits) {
    ParsedRequest out;
    std::string_view line = head.substr(0, head.find('\n'));
    if (line.ends_with('\r')) line.remove_suffix(1);
    auto parts = split(line, ' ');
    if (parts.size() != 3 || parts[0].empty() || parts[1].empty()) {
        out.refusal = Refusal{400, "not an HTTP/1.1 request line", {}};
        return out;
    }
    std::string_view method = parts[0], target = parts[1], version = parts[2];
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
        bool http = version.starts_with("HTTP/");
        out.refusal = Refusal{http ? 505 : 400, http ? "only HTTP/1.0 and HTTP/1.1" : "not an HTTP request line", {}};
        return out;
    }
    if (method != "GET" && method != "HEAD") {
        out.refusal = Refusal{405, "the agent's endpoints only read: GET or HEAD", {{"Allow", "GET, HEAD"}}};
        return out;
    }
    if (target.size() > limits.max_target) {
        out.refusal = Refusal{414, fmt::format("the request target is longer than {} bytes", limits.max_target), {}};
        return out;
    }
    if (!target.starts_with('/')) {
        out.refusal = Refusal{400, "the request target must be a path (/metrics, /v1/status, /v1/events)", {}};
        return out;
    }
    out.head_only = method == "HEAD";
    out.http10 = version == "HTTP/1.0";
    target = target.substr(0, target.find('#'));
    auto question = target.find('?');
    out.request.path = percent_decode(target.substr(0, question), false);
    if (question == std::string_view::npos) return out;
    for (auto pair : split(target.substr(question + 1), '&')) {
        if (pair.empty()) continue;
        auto equals = pair.find('=');
        std::string value =
            equals == std::string_view::npos ? std::string() : percent_decode(pair.substr(equals + 1), true);
        out.request.query[percent_decode(pair.substr(0, equals), true)] = std::move(value);
    }
    return out;
}

// The bind and listen of a TCP listener, errno kept: "address already in use" must say so.
Result<int> bind_tcp(const ListenAddress& a) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    bool v6 = a.host.find(':') != std::string::npos;
    if (v6) {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(static_cast<uint16_t>(a.port));
        if (::inet_pton(AF_INET6, a.host.c_str(), &s6->sin6_addr) != 1)
            return fail(fmt::format("--listen: {} is not an IPv6 address", a.host));
        len = sizeof *s6;
    } else {
        auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
        s4->sin_family = AF_INET;
        s4->sin_port = htons(static_cast<uint16_t>(a.port));
        std::string host = a.host == "localhost" ? "127.0.0.1" : a.host;
        if (::inet_pton(AF_INET, host.c_str(), &s4->sin_addr) != 1)
            return fail(fmt::format("--listen: {} is not an IPv4 address (give a numeric address)", a.host));
        len = sizeof *s4;
    }
    int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(fmt::format("--listen: socket: {}", std::strerror(errno)));
    // SO_REUSEADDR, not SO_REUSEPORT: a restart may bind over its old connections' TIME_WAIT, but a second agent
    // on the same port is refused instead of sharing it.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
        int err = errno;
        ::close(fd);
        return fail(fmt::format("--listen {}:{}: {}{}", a.host, a.port, std::strerror(err),
                                err == EADDRINUSE ? " (another program, or another gpudx agent, listens there)" : ""),
                    {}, err);
    }
    // SOMAXCONN: a burst of clients waits in the kernel's queue instead of being refused.
    if (::listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        ::close(fd);
        return fail(fmt::format("--listen {}:{}: listen: {}", a.host, a.port, std::strerror(err)), {}, err);
    }
    return fd;
}

}  // namespace

bool ListenAddress::loopback() const {
    return host == "localhost" || host.starts_with("127.") || host == "::1";
}

Result<ListenAddress> parse_listen_address(std::string_view text) {
    ListenAddress a;
    std::string_view port;
    if (text.starts_with("[")) {
        auto close = text.find("]:");
        if (close == std::string_view::npos) return fail(fmt::format("--listen {}: expected [ADDRESS]:PORT", text));
        a.host = std::string(text.substr(1, close - 1));
        port = text.substr(close + 2);
    } else {
        auto colon = text.rfind(':');
        if (colon == std::string_view::npos) return fail(fmt::format("--listen {}: expected HOST:PORT", text));
        a.host = std::string(text.substr(0, colon));
        port = text.substr(colon + 1);
        if (a.host.empty()) a.host = "127.0.0.1";
    }
    auto p = parse_uint(port);
    if (!p || *p < 1 || *p > 65535) return fail(fmt::format("--listen {}: the port must be 1 to 65535", text));
    a.port = static_cast<int>(*p);
    return a;
}

// One listener: a thread in poll(2) over the listening socket, a stop descriptor and at most
// limits.max_connections connections, every one non-blocking and under a deadline. Nothing a client does or
// fails to do blocks the thread: a slow client is a connection waiting in poll, not a thread reading it.
struct HttpServer::Impl {
    enum class Phase {
        reading,    // the request head, until limits.request_deadline after accept
        writing,    // the answer, until limits.answer_deadline after it was ready
        lingering,  // answered and shut for writing; what the client still sends is dropped until limits.linger
    };

    struct Connection {
        int fd = -1;
        uint64_t accepted = 0;  // accept order: the oldest connection has the smallest
        Phase phase = Phase::reading;
        Clock::time_point deadline;
        std::string in;              // the request head so far
        std::string out_head, out_body;
        // A streamed answer's next pieces (HttpResponse::more): out_body holds one chunk of it at a time.
        std::function<std::optional<std::string>()> more;
        bool chunked = false;        // the pieces go in the chunked coding (else the body ends with the connection)
        size_t sent = 0;             // of out_head + out_body
        size_t counted = 0;          // bytes counted in the listener's answer bytes (the handler's answers)
        uint64_t answer_order = 0;   // when its answer was ready: the one that waits longest has the smallest
        bool closed = false;
    };

    // Takes the listening socket (closed with the listener), makes its stop and spare descriptors.
    static Result<std::unique_ptr<Impl>> make(int listen_fd, HttpHandler handler, const HttpServerLimits& limits);

    HttpHandler handler;
    HttpServerLimits limits;
    int listen_fd = -1;
    int stop_fd = -1;   // eventfd: readable when the thread must end
    int spare_fd = -1;  // /dev/null, given up to accept and close a connection when no descriptor is left
    std::string unlink_on_stop;
    std::thread thread;

    mutable std::mutex stats_mutex;
    HttpServerStats published;  // `stats` as of the thread's last turn

    // The thread's own.
    std::vector<std::unique_ptr<Connection>> connections;
    size_t open = 0;
    HttpServerStats stats;
    uint64_t next_accepted = 0, next_answer = 0;
    Clock::time_point accept_paused_until{};

    ~Impl() {
        for (int fd : {listen_fd, stop_fd, spare_fd})
            if (fd >= 0) ::close(fd);
    }

    void serve();
    void accept_waiting(Clock::time_point now);
    void shed_one(Clock::time_point now);
    void read_request(Connection& c, Clock::time_point now);
    void answer(Connection& c, std::string_view head, Clock::time_point now);
    void refuse(Connection& c, const Refusal& r, Clock::time_point now);
    bool next_piece(Connection& c);
    void start_writing(Connection& c, std::string head, std::string body, size_t counted, Clock::time_point now);
    void write_answer(Connection& c, Clock::time_point now);
    void drain(Connection& c);
    void expire(Clock::time_point now);
    void close(Connection& c);
    // Lets go of what an answer holds; an answer of megabytes (a diagnosis with thousands of findings) gives its
    // pages back to the system, so the agent's memory does not keep the largest answer it ever sent.
    static void release_answer(Connection& c);
    bool close_oldest(bool writing_only);
};

void HttpServer::Impl::close(Connection& c) {
    if (c.closed) return;
    ::close(c.fd);
    c.fd = -1;
    c.closed = true;
    stats.answer_bytes -= c.counted;
    c.counted = 0;
    release_memory(c.in);
    release_answer(c);
    c.more = nullptr;
    --open;
}

void HttpServer::Impl::release_answer(Connection& c) {
    constexpr size_t kLargeAnswer = 1u << 20;
    bool large = c.out_body.capacity() >= kLargeAnswer;
    release_memory(c.out_head);
    release_memory(c.out_body);
    if (large) ::malloc_trim(0);
}

// Makes room. For a connection: one already answered (lingering: its client has all it will get), else the
// oldest still sending its request (a request takes microseconds: the oldest is the one not asking), else the
// oldest being answered. For an answer's bytes: the connection whose answer has waited longest to be read.
bool HttpServer::Impl::close_oldest(bool writing_only) {
    auto rank = [](const Connection& c) { return c.phase == Phase::lingering ? 0 : c.phase == Phase::reading ? 1 : 2; };
    Connection* oldest = nullptr;
    for (auto& c : connections) {
        if (c->closed) continue;
        if (writing_only) {
            if (c->counted == 0) continue;
            if (!oldest || c->answer_order < oldest->answer_order) oldest = c.get();
        } else if (!oldest || std::pair(rank(*c), c->accepted) < std::pair(rank(*oldest), oldest->accepted)) {
            oldest = c.get();
        }
    }
    if (!oldest) return false;
    close(*oldest);
    ++stats.closed_for_room;
    return true;
}

void HttpServer::Impl::accept_waiting(Clock::time_point now) {
    // At most a connection cap's worth per turn, so the connections already open are served between bursts.
    for (size_t i = 0; i < limits.max_connections; ++i) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) shed_one(now);
            return;  // EAGAIN: none left waiting
        }
        if (open >= limits.max_connections) close_oldest(false);
        auto c = std::make_unique<Connection>();
        c->fd = fd;
        c->accepted = next_accepted++;
        c->deadline = now + limits.request_deadline;
        connections.push_back(std::move(c));
        ++open;
        stats.peak_connections = std::max(stats.peak_connections, open);
    }
}

// No descriptor left: the connection waiting would keep the listener readable and poll() would return at once,
// forever. The spare descriptor is given up to accept it and close it at once, then taken again; without a
// spare, the listener is not watched for kAcceptPause.
void HttpServer::Impl::shed_one(Clock::time_point now) {
    ++stats.accept_failures;
    if (spare_fd >= 0) {
        ::close(spare_fd);
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) ::close(fd);
        spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    if (spare_fd < 0) accept_paused_until = now + kAcceptPause;
}

void HttpServer::Impl::read_request(Connection& c, Clock::time_point now) {
    char buf[4096];
    for (;;) {
        // Never more than one byte past the limit: that byte says the limit is passed.
        size_t room = limits.max_request_head + 1 - c.in.size();
        ssize_t n = ::recv(c.fd, buf, std::min(sizeof buf, room), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {  // gone (or failed) before the request was whole: nobody to answer
            close(c);
            return;
        }
        c.in.append(buf, static_cast<size_t>(n));
        if (size_t end = head_end(c.in); end != std::string::npos && end <= limits.max_request_head) {
            answer(c, std::string_view(c.in).substr(0, end), now);
            return;
        }
        if (c.in.size() > limits.max_request_head) {
            // No line end yet: it is the request line that is too long.
            bool line_whole = c.in.find('\n') != std::string::npos;
            int status = line_whole ? 431 : 414;
            refuse(c,
                   Refusal{status,
                           fmt::format("the request {} is longer than {} bytes", line_whole ? "head" : "line",
                                       limits.max_request_head),
                           {}},
                   now);
            return;
        }
    }
}

void HttpServer::Impl::answer(Connection& c, std::string_view head, Clock::time_point now) {
    auto parsed = parse_request(head, limits);
    c.in = {};
    if (parsed.refusal) {
        refuse(c, *parsed.refusal, now);
        return;
    }
    HttpResponse res;
    try {
        res = handler(parsed.request);
    } catch (const std::exception&) {
        // The thread serves every client of this listener: one request's failure must not end it.
        refuse(c, Refusal{500, "the agent could not make this answer", {}}, now);
        return;
    }
    ++stats.answered;
    now = Clock::now();  // the answer's deadline runs from when it is ready
    BodyEnd end = !res.more ? BodyEnd::length : parsed.http10 ? BodyEnd::close : BodyEnd::chunked;
    if (parsed.head_only) res.more = nullptr;  // the head says how the body would come; none comes
    std::string out_head = answer_head(res.status, res.content_type, end, res.body.size(), res.headers);
    if (parsed.head_only) res.body = {};
    if (end == BodyEnd::chunked && !res.body.empty()) out_head += chunk_in_place(res.body);
    size_t size = out_head.size() + res.body.size();
    // The answers held for clients that do not read are bounded: the longest-waiting go first.
    while (stats.answer_bytes + size > limits.max_answer_bytes && close_oldest(true)) {
    }
    if (stats.answer_bytes + size > limits.max_answer_bytes) {
        refuse(c, Refusal{503, "the answer is larger than the agent holds for its clients", {}}, now);
        return;
    }
    c.more = std::move(res.more);
    c.chunked = end == BodyEnd::chunked;
    start_writing(c, std::move(out_head), std::move(res.body), size, now);
}

// The server's own answers are small and not counted in the answer bytes: the connection cap bounds them.
void HttpServer::Impl::refuse(Connection& c, const Refusal& r, Clock::time_point now) {
    ++stats.refused;
    std::string body = fmt::format("{{\"error\":\"{}\"}}\n", r.why);
    start_writing(c, answer_head(r.status, "application/json", BodyEnd::length, body.size(), r.headers), std::move(body), 0, now);
}

void HttpServer::Impl::start_writing(Connection& c, std::string head, std::string body, size_t counted,
                                     Clock::time_point now) {
    c.in = {};
    c.out_head = std::move(head);
    c.out_body = std::move(body);
    c.sent = 0;
    c.counted = counted;
    stats.answer_bytes += counted;
    stats.peak_answer_bytes = std::max(stats.peak_answer_bytes, stats.answer_bytes);
    c.answer_order = next_answer++;
    c.phase = Phase::writing;
    c.deadline = now + limits.answer_deadline;
    write_answer(c, now);  // most answers fit the socket's buffer at once
}

// The streamed answer's next chunk into out_body, counted in the answer bytes in place of the one sent; the
// last chunk once `more` says the end. False when the connection was closed (the piece could not be made).
bool HttpServer::Impl::next_piece(Connection& c) {
    std::optional<std::string> piece;
    try {
        do piece = c.more();
        while (piece && piece->empty());  // an empty chunk would end the answer
    } catch (const std::exception&) {
        // The head is sent: the answer can only be cut short, which a chunked client sees as incomplete.
        close(c);
        return false;
    }
    stats.answer_bytes -= c.counted;
    c.out_head = {};
    if (!c.chunked) c.out_body = piece ? std::move(*piece) : std::string();
    else if (!piece) c.out_body = "0\r\n\r\n";
    else {
        c.out_head = chunk_in_place(*piece);
        c.out_body = std::move(*piece);
    }
    if (!piece) c.more = nullptr;
    c.sent = 0;
    c.counted = c.out_head.size() + c.out_body.size();
    stats.answer_bytes += c.counted;
    stats.peak_answer_bytes = std::max(stats.peak_answer_bytes, stats.answer_bytes);
    return true;
}

void HttpServer::Impl::write_answer(Connection& c, Clock::time_point now) {
    size_t made = 0;  // of a streamed answer, in this turn
    for (;;) {
        size_t total = c.out_head.size() + c.out_body.size();
        if (c.sent == total) {
            if (!c.more) break;
            // A fast client's large answer leaves the thread to the listener's other connections now and then:
            // the socket is still writable, so the next turn of poll goes on with it.
            if (made >= kStreamTurnBytes) return;
            if (!next_piece(c)) return;
            made += c.out_body.size();
            continue;
        }
        iovec parts[2];
        int count = 0;
        if (c.sent < c.out_head.size()) parts[count++] = {c.out_head.data() + c.sent, c.out_head.size() - c.sent};
        size_t body_from = c.sent > c.out_head.size() ? c.sent - c.out_head.size() : 0;
        if (body_from < c.out_body.size())
            parts[count++] = {c.out_body.data() + body_from, c.out_body.size() - body_from};
        msghdr msg{};
        msg.msg_iov = parts;
        msg.msg_iovlen = static_cast<size_t>(count);
        ssize_t n = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0) {  // the client is gone
            close(c);
            return;
        }
        c.sent += static_cast<size_t>(n);
    }
    stats.answer_bytes -= c.counted;
    c.counted = 0;
    release_answer(c);
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Phase::lingering;
    c.deadline = now + limits.linger;
}

void HttpServer::Impl::drain(Connection& c) {
    char buf[4096];
    for (;;) {
        ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {  // the client closed its end: done
            close(c);
            return;
        }
    }
}

void HttpServer::Impl::expire(Clock::time_point now) {
    for (auto& c : connections) {
        if (c->closed || c->deadline > now) continue;
        if (c->phase == Phase::reading) {
            // What came while the thread was making another answer is read first: the delay was the server's.
            read_request(*c, now);
            if (c->closed || c->phase != Phase::reading) continue;
            // Said, if the client can take it at once; it is closed either way.
            static const std::string kTimeout = [] {
                std::string body = "{\"error\":\"the request was not whole within the deadline\"}\n";
                return answer_head(408, "application/json", BodyEnd::length, body.size(), {}) + body;
            }();
            (void)!::send(c->fd, kTimeout.data(), kTimeout.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (c->phase != Phase::lingering) ++stats.timed_out;
        close(*c);
    }
}

void HttpServer::Impl::serve() {
    std::vector<pollfd> fds;
    for (;;) {
        std::erase_if(connections, [](const auto& c) { return c->closed; });
        {
            std::lock_guard lock(stats_mutex);
            published = stats;
            published.connections = open;
        }
        auto now = Clock::now();
        bool accepting = now >= accept_paused_until;
        fds.clear();
        fds.push_back({stop_fd, POLLIN, 0});
        fds.push_back({accepting ? listen_fd : -1, POLLIN, 0});  // poll() skips a negative descriptor
        std::optional<Clock::time_point> wake;
        if (!accepting) wake = accept_paused_until;
        for (auto& c : connections) {
            fds.push_back({c->fd, static_cast<short>(c->phase == Phase::writing ? POLLOUT : POLLIN), 0});
            if (!wake || c->deadline < *wake) wake = c->deadline;
        }
        // No timeout while nothing is open: an idle listener costs no wake-up.
        int timeout_ms = -1;
        if (wake) {
            auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - now).count();
            timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
        }
        int n = ::poll(fds.data(), fds.size(), timeout_ms);
        if (n < 0) {
            // EINTR; or ENOMEM, which passes: the next turn tries again, without spinning.
            if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
        }
        if (fds[0].revents != 0) break;
        now = Clock::now();
        for (size_t i = 0; i < connections.size(); ++i) {
            Connection& c = *connections[i];
            short events = fds[i + 2].revents;
            if (c.closed || events == 0) continue;
            switch (c.phase) {
                case Phase::reading: read_request(c, now); break;
                case Phase::writing: write_answer(c, now); break;
                case Phase::lingering: drain(c); break;
            }
        }
        if (fds[1].revents != 0) accept_waiting(Clock::now());
        // Deadlines last: a request that came whole while a long answer was being made is served above, not
        // timed out for the server's own slowness.
        expire(Clock::now());
    }
    for (auto& c : connections) close(*c);
    connections.clear();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl, std::string where) : impl_(std::move(impl)), where_(std::move(where)) {}

HttpServer::~HttpServer() { stop(); }

Result<std::unique_ptr<HttpServer::Impl>> HttpServer::Impl::make(int listen_fd, HttpHandler handler,
                                                                 const HttpServerLimits& limits) {
    auto impl = std::make_unique<Impl>();
    impl->listen_fd = listen_fd;
    impl->handler = std::move(handler);
    impl->limits = limits;
    impl->limits.max_connections = std::max<size_t>(impl->limits.max_connections, 1);
    impl->stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (impl->stop_fd < 0) return fail(fmt::format("eventfd: {}", std::strerror(errno)));
    impl->spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    return impl;
}

Result<std::unique_ptr<HttpServer>> HttpServer::listen_tcp(const ListenAddress& a, HttpHandler handler,
                                                           const HttpServerLimits& limits) {
    auto fd = bind_tcp(a);
    if (!fd) return std::unexpected(fd.error());
    auto impl = Impl::make(*fd, std::move(handler), limits);
    if (!impl) return fail(fmt::format("--listen {}:{}: {}", a.host, a.port, impl.error().message));
    std::string where = a.host.find(':') != std::string::npos ? fmt::format("http://[{}]:{}", a.host, a.port)
                                                              : fmt::format("http://{}:{}", a.host, a.port);
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(*impl), where));
}

Result<std::unique_ptr<HttpServer>> HttpServer::listen_unix(const std::string& path, HttpHandler handler,
                                                            const HttpServerLimits& limits, mode_t mode) {
    sockaddr_un sa{};
    if (path.size() >= sizeof sa.sun_path)
        return fail(fmt::format("--socket {}: longer than a unix socket path may be ({} bytes)", path,
                                sizeof sa.sun_path - 1));
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) return fail(fmt::format("--socket {}: exists and is not a socket", path));
        if (::access(path.c_str(), W_OK) != 0 && errno == EACCES)
            return fail(fmt::format("--socket {}: a socket this user may not connect to (another agent's?)", path));
        AgentAddress other;
        other.socket_path = path;
        if (auto answer = http_get(other, "/v1/status?format=slurm", std::chrono::milliseconds(2000)); answer)
            return fail(fmt::format("--socket {}: another gpudx agent answers there", path));
        ::unlink(path.c_str());  // a stale socket of an agent that is gone
    }
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(fmt::format("--socket {}: socket: {}", path, std::strerror(errno)));
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.data(), path.size());
    // The file is made with `mode` from the start, through the umask while bind makes it (the agent's own
    // threads make no files at this point of its start), so no client connects in a moment of a wider mode;
    // chmod after, as a default ACL on the directory takes precedence over the umask.
    mode_t old_umask = ::umask(~mode & 0777);
    int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    int err = errno;
    ::umask(old_umask);
    if (rc != 0) {
        ::close(fd);
        return fail(fmt::format("--socket {}: cannot listen there: {}", path, std::strerror(err)), path, err);
    }
    if (::chmod(path.c_str(), mode) != 0 || ::listen(fd, SOMAXCONN) != 0) {
        err = errno;
        ::close(fd);
        ::unlink(path.c_str());
        return fail(fmt::format("--socket {}: cannot listen there: {}", path, std::strerror(err)), path, err);
    }
    auto impl = Impl::make(fd, std::move(handler), limits);
    if (!impl) {
        ::unlink(path.c_str());
        return fail(fmt::format("--socket {}: {}", path, impl.error().message));
    }
    (*impl)->unlink_on_stop = path;
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(*impl), "unix:" + path));
}

void HttpServer::start() {
    if (impl_ && !impl_->thread.joinable() && impl_->listen_fd >= 0)
        impl_->thread = std::thread([this] { impl_->serve(); });
}

void HttpServer::stop() {
    if (!impl_) return;
    if (impl_->thread.joinable()) {
        uint64_t one = 1;
        (void)!::write(impl_->stop_fd, &one, sizeof one);
        impl_->thread.join();
    }
    // Closed now, so a client that comes later is refused at once instead of waiting in the queue.
    if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
    impl_->listen_fd = -1;
    if (!impl_->unlink_on_stop.empty()) ::unlink(impl_->unlink_on_stop.c_str());
    impl_->unlink_on_stop.clear();
}

HttpServerStats HttpServer::stats() const {
    std::lock_guard lock(impl_->stats_mutex);
    return impl_->published;
}

std::string AgentAddress::describe() const {
    return socket_path.empty() ? fmt::format("http://{}:{}", host, port) : socket_path;
}

Result<AgentAddress> parse_agent_url(std::string_view url) {
    std::string_view rest = url;
    if (!rest.starts_with("http://")) return fail(fmt::format("--url {}: expected http://HOST:PORT", url));
    rest.remove_prefix(7);
    while (rest.ends_with("/")) rest.remove_suffix(1);
    auto a = parse_listen_address(rest);
    if (!a) return fail(fmt::format("--url {}: expected http://HOST:PORT", url));
    AgentAddress out;
    out.host = a->host;
    out.port = a->port;
    return out;
}

Result<HttpReply> http_get(const AgentAddress& a, const std::string& path_and_query, std::chrono::milliseconds timeout) {
    std::unique_ptr<httplib::Client> client;
    // The socket is for the agent's user and group (docs/agent.md): anyone else is told so, not "no agent".
    if (!a.socket_path.empty() && ::access(a.socket_path.c_str(), W_OK) != 0 && errno == EACCES)
        return fail(fmt::format("{}: permission denied (the agent's socket is for its user and group, docs/agent.md; "
                                "ask its TCP listener instead: --url http://127.0.0.1:9400 by default)",
                                a.socket_path));
    if (!a.socket_path.empty()) {
        client = std::make_unique<httplib::Client>(a.socket_path);
        client->set_address_family(AF_UNIX);
    } else {
        client = std::make_unique<httplib::Client>(a.host, a.port);
    }
    client->set_connection_timeout(timeout);
    client->set_read_timeout(timeout);
    client->set_write_timeout(timeout);
    auto res = client->Get(path_and_query);
    if (!res) {
        auto err = res.error();
        if (err == httplib::Error::Connection)
            return fail(fmt::format("no gpudx agent answers at {}", a.describe()));
        return fail(fmt::format("asking the gpudx agent at {}: {}", a.describe(), httplib::to_string(err)));
    }
    HttpReply r;
    r.status = res->status;
    r.body = res->body;
    for (const auto& [k, v] : res->headers) r.headers[to_lower(k)] = v;
    return r;
}

}  // namespace gpudx
