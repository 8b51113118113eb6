#include "agent/http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "core/text.hpp"

namespace gpudx {
namespace {

// Two workers per server: requests are answered from memory in microseconds; more threads would only cost
// memory on every GPU node.
constexpr size_t kWorkers = 2;

void configure(httplib::Server& s, const HttpHandler& handler) {
    s.new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
    // One request per connection: an idle keep-alive connection costs a wake-up every 10 ms in cpp-httplib,
    // and a scrape every 15 s gains nothing from keeping it.
    s.set_keep_alive_max_count(1);
    s.set_read_timeout(5, 0);
    s.set_write_timeout(5, 0);
    s.set_payload_max_length(64 * 1024);
    // SO_REUSEADDR, and not cpp-httplib's SO_REUSEPORT: a restart may bind over its old connections' TIME_WAIT,
    // but a second agent on the same port is refused instead of sharing it.
    s.set_socket_options([](int sock) {
        int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    s.Get(R"(/.*)", [handler](const httplib::Request& req, httplib::Response& res) {
        HttpRequest r;
        r.path = req.path;
        for (const auto& [k, v] : req.params) r.query[k] = v;
        HttpResponse out = handler(r);
        res.status = out.status;
        for (const auto& [k, v] : out.headers) res.set_header(k, v);
        res.set_content(std::move(out.body), out.content_type);
    });
}

// The bind cpp-httplib will make, made first to learn errno: "address already in use" must say so.
Result<void> probe_bind(const ListenAddress& a) {
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
    int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(fmt::format("--listen: socket: {}", std::strerror(errno)));
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len);
    int err = errno;
    ::close(fd);
    if (rc != 0)
        return fail(fmt::format("--listen {}:{}: {}{}", a.host, a.port, std::strerror(err),
                                err == EADDRINUSE ? " (another program, or another gpudx agent, listens there)" : ""),
                    {}, err);
    return {};
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

struct HttpServer::Impl {
    httplib::Server server;
    std::thread thread;
    std::string unlink_on_stop;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl, std::string where) : impl_(std::move(impl)), where_(std::move(where)) {}

HttpServer::~HttpServer() { stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::listen_tcp(const ListenAddress& a, HttpHandler handler) {
    if (auto probe = probe_bind(a); !probe) return std::unexpected(probe.error());
    auto impl = std::make_unique<Impl>();
    configure(impl->server, handler);
    if (!impl->server.bind_to_port(a.host, a.port))
        return fail(fmt::format("--listen {}:{}: cannot listen there", a.host, a.port));
    std::string where = a.host.find(':') != std::string::npos ? fmt::format("http://[{}]:{}", a.host, a.port)
                                                              : fmt::format("http://{}:{}", a.host, a.port);
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl), where));
}

Result<std::unique_ptr<HttpServer>> HttpServer::listen_unix(const std::string& path, HttpHandler handler) {
    if (path.size() >= sizeof(sockaddr_un::sun_path))
        return fail(fmt::format("--socket {}: longer than a unix socket path may be ({} bytes)", path,
                                sizeof(sockaddr_un::sun_path) - 1));
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) return fail(fmt::format("--socket {}: exists and is not a socket", path));
        AgentAddress other;
        other.socket_path = path;
        if (auto answer = http_get(other, "/v1/status?format=slurm", std::chrono::milliseconds(2000)); answer)
            return fail(fmt::format("--socket {}: another gpudx agent answers there", path));
        ::unlink(path.c_str());  // a stale socket of an agent that is gone
    }
    auto impl = std::make_unique<Impl>();
    configure(impl->server, handler);
    impl->server.set_address_family(AF_UNIX);
    if (!impl->server.bind_to_port(path, 80))
        return fail(fmt::format("--socket {}: cannot listen there: {}", path, std::strerror(errno)));
    // Every local user may ask: the API only reads (docs/agent.md). The directory's mode still decides.
    ::chmod(path.c_str(), 0666);
    impl->unlink_on_stop = path;
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl), "unix:" + path));
}

void HttpServer::start() {
    impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
}

void HttpServer::stop() {
    if (!impl_) return;
    impl_->server.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
    if (!impl_->unlink_on_stop.empty()) ::unlink(impl_->unlink_on_stop.c_str());
    impl_->unlink_on_stop.clear();
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
