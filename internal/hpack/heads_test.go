package hpack

// Typical heads, for the differential tests, the allocation tests and
// the benchmarks: what browsers, curl, gRPC and servers send.

// browserRequest is a browser's navigation request over HTTP/2.
var browserRequest = []tf{
	{":method", "GET", false},
	{":authority", "www.example.com", false},
	{":scheme", "https", false},
	{":path", "/articles/2024/hpack-in-practice?ref=home", false},
	{"sec-ch-ua", `"Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"`, false},
	{"sec-ch-ua-mobile", "?0", false},
	{"sec-ch-ua-platform", `"Linux"`, false},
	{"upgrade-insecure-requests", "1", false},
	{"user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", false},
	{"accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", false},
	{"sec-fetch-site", "same-origin", false},
	{"sec-fetch-mode", "navigate", false},
	{"sec-fetch-dest", "document", false},
	{"referer", "https://www.example.com/", false},
	{"accept-encoding", "gzip, deflate, br, zstd", false},
	{"accept-language", "en-GB,en;q=0.9", false},
	{"cookie", "session=3f9a1c0e7b2d4e6f8a0b1c2d3e4f5a6b; theme=dark", false},
}

// curlRequest is what curl --http2 sends.
var curlRequest = []tf{
	{":method", "GET", false},
	{":scheme", "https", false},
	{":authority", "127.0.0.1:8443", false},
	{":path", "/", false},
	{"user-agent", "curl/8.5.0", false},
	{"accept", "*/*", false},
}

// grpcRequest is a unary gRPC call.
var grpcRequest = []tf{
	{":method", "POST", false},
	{":scheme", "http", false},
	{":path", "/helloworld.Greeter/SayHello", false},
	{":authority", "backend:50051", false},
	{"content-type", "application/grpc", false},
	{"user-agent", "grpc-go/1.64.0", false},
	{"te", "trailers", false},
	{"grpc-timeout", "9998m", false},
	{"authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig", true},
}

// proxiedRequest is a request as Helios forwards it to an HTTP/2
// backend: X-Forwarded-* and a new X-Request-Id each time.
var proxiedRequest = []tf{
	{":method", "GET", false},
	{":scheme", "https", false},
	{":authority", "api.internal:8443", false},
	{":path", "/v1/items/42", false},
	{"user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", false},
	{"accept", "application/json", false},
	{"accept-encoding", "gzip, deflate, br, zstd", false},
	{"x-forwarded-for", "203.0.113.7", false},
	{"x-forwarded-proto", "https", false},
	{"x-forwarded-host", "www.example.com", false},
	{"x-request-id", "0123456789abcdef0123456789abcdef", false},
}

// fixedResponse is a proxy's fixed answer.
var fixedResponse = []tf{
	{":status", "200", false},
	{"content-type", "text/plain; charset=utf-8", false},
	{"content-length", "13", false},
	{"date", "Mon, 21 Oct 2013 20:13:21 GMT", false},
	{"server", "helios", false},
}

// pageResponse is a web server's answer to a page.
var pageResponse = []tf{
	{":status", "200", false},
	{"date", "Mon, 21 Oct 2013 20:13:21 GMT", false},
	{"content-type", "text/html; charset=utf-8", false},
	{"content-length", "48213", false},
	{"cache-control", "private, max-age=0", false},
	{"etag", `"5f3c-1a2b3c4d"`, false},
	{"last-modified", "Sun, 20 Oct 2013 08:00:00 GMT", false},
	{"vary", "Accept-Encoding", false},
	{"strict-transport-security", "max-age=63072000; includeSubDomains; preload", false},
	{"x-content-type-options", "nosniff", false},
	{"set-cookie", "session=3f9a1c0e7b2d4e6f8a0b1c2d3e4f5a6b; Path=/; HttpOnly; Secure", false},
}

// grpcTrailers ends a gRPC answer.
var grpcTrailers = []tf{
	{"grpc-status", "0", false},
	{"grpc-message", "", false},
}

// typicalHeads are all of the above.
var typicalHeads = [][]tf{browserRequest, curlRequest, grpcRequest, proxiedRequest, fixedResponse, pageResponse, grpcTrailers}
