#pragma once
// The agent's HTTP face (docs/agent.md): a server on a TCP address and one on a unix socket, and the client
// `gpudx status` and `gpudx events` ask it with. Both are cpp-httplib (third_party/cpp-httplib, header-only,
// no TLS or compression), kept to http.cpp so one file compiles it.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
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
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// "HOST:PORT", "[::1]:PORT", ":PORT" (loopback). The port must be 1..65535.
struct ListenAddress {
    std::string host;
    int port = 0;
    bool loopback() const;
};
Result<ListenAddress> parse_listen_address(std::string_view text);

// One listening server: bound when made (a port in use, an address that is not this machine's, a socket
// another agent answers on: an Error saying which), serving GET requests in its own threads once started.
class HttpServer {
public:
    static Result<std::unique_ptr<HttpServer>> listen_tcp(const ListenAddress& a, HttpHandler handler);
    // Replaces a stale socket file; refuses one a running agent still answers on.
    static Result<std::unique_ptr<HttpServer>> listen_unix(const std::string& path, HttpHandler handler);
    ~HttpServer();
    void start();
    // Stops accepting, waits for the requests in progress, joins the threads.
    void stop();
    std::string where() const { return where_; }

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
