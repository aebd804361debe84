"""Static server for the probe page with a strict CSP (no inline script, no eval)."""
import functools, http.server, os, sys

CSP = ("default-src 'none'; script-src 'self'; connect-src 'self'; "
       "style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

class H(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Cache-Control", "no-store")
        super().end_headers()
    def log_message(self, *a):
        pass

if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    d = os.path.dirname(os.path.abspath(__file__))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(H, directory=d))
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
