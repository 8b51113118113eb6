#pragma once
// The agent's HTTP face (docs/agent.md): a server on a TCP address and one on a unix socket, and the client
// `gpudx status` and `gpudx events` ask it with. The server is our own (one thread, poll(2), every client
// bounded: docs/agent.md, "Why the server is our own"); the client is cpp-httplib (third_party/cpp-httplib,
// header-only, no TLS or compression), kept to http.cpp so one file compiles it.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace gpudx {

struct HttpRequest {
    std::string path;
    std::map<std::string, std::string> query;
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    // Set, the answer is `body` and then what this returns, piece by piece as the client takes them (chunked; to
    // an HTTP/1.0 client, ended by the close): an answer of any size holds one piece in memory. Called on the
    // server's thread, a piece when the one before is sent; nullopt at the end.
    std::function<std::optional<std::string>()> more;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// "HOST:PORT", "[::1]:PORT", ":PORT" (loopback). The port must be 1..65535.
struct ListenAddress {
    std::string host;
    int port = 0;
    bool loopback() const;
};
Result<ListenAddress> parse_listen_address(std::string_view text);

// What one listener lets its clients have, all of them together: whatever they send or fail to read, the
// descriptors, memory and time they take are bounded by these (docs/agent.md, "Why the server is our own").
struct HttpServerLimits {
    // Connections open at once; a new one beyond this closes one already answered, else the oldest still
    // sending its request (a request takes microseconds: the oldest is the one not asking), else the oldest
    // being answered.
    size_t max_connections = 64;
    // From accept to the end of the request head, however slowly its bytes trickle in (then closed, 408).
    std::chrono::milliseconds request_deadline{2000};
    // The request line and headers together (431 beyond); the target alone (414 beyond).
    size_t max_request_head = 8192;
    size_t max_target = 4096;
    // From the answer being ready to its last byte sent (then closed): a client that does not read.
    std::chrono::milliseconds answer_deadline{10000};
    // The handler's answers held for sending, all connections together; a new answer that does not fit
    // closes the connections whose answers wait longest, and is answered 503 if it still does not fit.
    size_t max_answer_bytes = 16u << 20;
    // After the answer, what the client still sends is read and dropped for this long before closing (a close
    // with unread bytes would reset the connection and could lose the answer's end).
    std::chrono::milliseconds linger{500};
};

// What a listener holds and has done (tests read it; peaks since start).
struct HttpServerStats {
    size_t connections = 0;
    size_t peak_connections = 0;
    size_t answer_bytes = 0;  // the handler's answers not yet sent
    size_t peak_answer_bytes = 0;
    uint64_t answered = 0;         // requests that reached the handler
    uint64_t refused = 0;          // requests answered 4xx/5xx by the server itself (too large, not GET, ...)
    uint64_t closed_for_room = 0;  // connections closed to make room for newer ones or their answers
    uint64_t timed_out = 0;        // connections closed at a deadline
    uint64_t accept_failures = 0;  // connections accepted and closed at once: no descriptor was left
};

// One listening server: bound and listening when made (a port in use, an address that is not this machine's,
// a socket another agent answers on: an Error saying which), serving GET and HEAD in a thread of its own once
// started, one request per connection.
class HttpServer {
public:
    static Result<std::unique_ptr<HttpServer>> listen_tcp(const ListenAddress& a, HttpHandler handler,
                                                          const HttpServerLimits& limits = {});
    // Replaces a stale socket file; refuses one a running agent still answers on. The socket is made with
    // `mode` (default 0660: the agent's user and group; docs/agent.md says why).
    static Result<std::unique_ptr<HttpServer>> listen_unix(const std::string& path, HttpHandler handler,
                                                           const HttpServerLimits& limits = {}, mode_t mode = 0660);
    ~HttpServer();
    void start();
    // Stops accepting, closes every connection, joins the thread; a unix socket's file is removed.
    void stop();
    std::string where() const { return where_; }
    HttpServerStats stats() const;

private:
    struct Impl;
    explicit HttpServer(std::unique_ptr<Impl> impl, std::string where);
    std::unique_ptr<Impl> impl_;
    std::string where_;
};

// Where a client finds the agent: a unix socket path, or an http://HOST:PORT URL.
struct AgentAddress {
    std::string socket_path;
    std::string host;
    int port = 0;
    std::string describe() const;
};
// "http://127.0.0.1:9400" (a trailing "/" allowed); anything else is an Error.
Result<AgentAddress> parse_agent_url(std::string_view url);

struct HttpReply {
    int status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // names lower case
};
// GET path_and_query. An Error when nothing answers (no agent: the message says so) or the connection fails.
Result<HttpReply> http_get(const AgentAddress& a, const std::string& path_and_query, std::chrono::milliseconds timeout);

}  // namespace gpudx
