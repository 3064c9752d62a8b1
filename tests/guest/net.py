"""The world a GCE guest sees, stood in inside a network namespace the boot test made.

    python net.py CONFIG.json     (as root; runs until SIGTERM)

Listens inside the namespace (sockets keep the namespace they were made in) and serves:
- 169.254.169.254:80, GCE's metadata server: the instance's metadata, only with the
  `Metadata-Flavor: Google` header, answering with it (what cloud-init's GCE datasource and
  Google's guest agent read), with an ETag on every value and `?wait_for_change=true` (with
  `last_etag`, `timeout_sec`) as Google documents them ("View and query VM metadata",
  https://cloud.google.com/compute/docs/metadata/querying-metadata; the guest agent's client,
  GoogleCloudPlatform/guest-agent metadata/metadata.go, reads the `etag` header and sends it back as
  last_etag). The test changes an instance attribute through `instance-attributes.json` in the state
  directory, as `pulumi up` does with setMetadata. Guest attributes ("Setting and querying guest
  attributes", https://cloud.google.com/compute/docs/metadata/manage-guest-attributes): a PUT to
  instance/guest-attributes/NAMESPACE/KEY is kept (guest-attributes.json, and each write with its time
  in guest-attributes.log) when the instance's metadata has enable-guest-attributes=TRUE; without it
  the server answers 403 "Guest attributes endpoint access is disabled." (the text clients test for,
  e.g. salrashid123/gce_metadata_server's README transcript);
- 127.0.0.2:80, deb.debian.org: a pass-through to the Debian mirror this machine's apt uses;
- 127.0.0.3:443, developer.download.nvidia.com over TLS (a test CA the guest trusts): the
  fake NVIDIA repository the test built;
- 127.0.0.4:80, the wheelhouse: the host's one copy of the guest lock's wheels;
- 127.0.0.5:80, the Hugging Face Hub (hub_repo_standin.py) for the model repos the config names (hub_repos: repo id ->
  folder), which the guest reaches through HF_ENDPOINT (the boot benchmark's; the boot test serves a path);
and on the host's loopback a tunnel to the guest's 127.0.0.1:<guest_port> (as IAP's SSH tunnel
on GCE). The file `offline` in the state directory cuts the internet (Debian, NVIDIA, wheels, Hub),
`nvidia-down` the NVIDIA repository alone; the metadata server stays, as on GCE. The wheels and the Hub share one
link of the config's mirror_bytes_per_s (0 or absent: as fast as loopback goes), which the file `mirror-rate` in the
state directory (bytes a second) overrides while it exists. Every request is logged to requests.log, one line each:
service, method, path, status, and when it was answered (epoch seconds).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import hub_repo_standin

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def setns(path: str | int) -> None:
    fd = os.open(path, os.O_RDONLY) if isinstance(path, str) else path
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        if isinstance(path, str):
            os.close(fd)


GUEST_ATTRIBUTES_OFF = b"Guest attributes endpoint access is disabled.\n"


class World:
    def __init__(self, config: dict):
        self.config = config
        self.state = Path(config["state_dir"])
        self.log_lock = threading.Lock()
        self.guest_attributes: dict[str, dict[str, str]] = {}
        # The link the wheels and the Hub share (a VM's one network interface).
        self.mirror = hub_repo_standin.Throttle(self.mirror_rate)

    def mirror_rate(self) -> float:
        with contextlib.suppress(OSError, ValueError):
            return float((self.state / "mirror-rate").read_text())
        return float(self.config.get("mirror_bytes_per_s") or 0)

    def metadata(self) -> dict:
        """The metadata tree now: the instance's attributes as the test last set them, and its guest attributes."""
        tree = json.loads(json.dumps(self.config["metadata"]))
        overrides = self.state / "instance-attributes.json"
        if overrides.exists():
            tree["instance"]["attributes"] = json.loads(overrides.read_text())
        with self.log_lock:
            tree["instance"]["guest-attributes"] = json.loads(json.dumps(self.guest_attributes))
        return tree

    def guest_attributes_on(self) -> bool:
        tree = self.metadata()
        return "TRUE" in (str(tree["instance"]["attributes"].get("enable-guest-attributes", "")).upper(),
                          str(tree["project"]["attributes"].get("enable-guest-attributes", "")).upper())

    def put_guest_attribute(self, namespace: str, key: str, value: str) -> None:
        with self.log_lock:
            self.guest_attributes.setdefault(namespace, {})[key] = value
            (self.state / "guest-attributes.json").write_text(json.dumps(self.guest_attributes))
            with (self.state / "guest-attributes.log").open("a") as f:
                f.write(json.dumps({"t": time.time(), "key": f"{namespace}/{key}", "value": value}) + "\n")

    def down(self, service: str) -> bool:
        if service == "metadata":
            return False
        return (self.state / "offline").exists() or (service == "nvidia" and (self.state / "nvidia-down").exists())

    def log(self, service: str, method: str, path: str, status: int) -> None:
        with self.log_lock, (self.state / "requests.log").open("a") as f:
            f.write(f"{service} {method} {path} {status} {time.time():.3f}\n")


def handler_for(world: World, service: str):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # the request log above is the record
            pass

        def handle(self):
            if world.down(service):  # unreachable: the connection closes before any answer
                world.log(service, "-", "dropped (offline)", 0)
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            super().handle()

        def send(self, status: int, body: bytes, headers: dict[str, str] | None = None):
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            world.log(service, self.command, self.path, status)

        def do_GET(self):
            getattr(self, f"get_{service}")()

        do_HEAD = do_GET

        def do_PUT(self):  # cloud-init publishes host keys as guest attributes; gemma4-t4 its boot's phase
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            prefix = "/computeMetadata/v1/instance/guest-attributes/"
            path = urllib.parse.urlsplit(self.path).path
            if service != "metadata":
                self.send(405, b"")
            elif not path.startswith(prefix):
                self.send(200, b"")
            elif self.headers.get("Metadata-Flavor") != "Google":
                self.send(403, b"Missing Metadata-Flavor:Google header.\n", {"Metadata-Flavor": "Google"})
            elif not world.guest_attributes_on():
                self.send(403, GUEST_ATTRIBUTES_OFF, {"Metadata-Flavor": "Google"})
            else:
                namespace, _, key = path.removeprefix(prefix).partition("/")
                world.put_guest_attribute(namespace, key, body.decode())
                self.send(200, b"", {"Metadata-Flavor": "Google"})

        # --- GCE metadata ---------------------------------------------------------------
        def get_metadata(self):
            flavor = {"Metadata-Flavor": "Google"}
            if self.headers.get("Metadata-Flavor") != "Google":
                self.send(403, b"Missing Metadata-Flavor:Google header.\n", flavor)
                return
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query.lower())
            if not url.path.startswith("/computeMetadata/v1/"):
                self.send(404, b"Not Found\n", flavor)
                return
            parts = [p for p in url.path.removeprefix("/computeMetadata/v1/").split("/") if p]
            answer = self.answer(parts, query)
            if query.get("wait_for_change", [""])[0] == "true" and answer is not None:
                # Answers when the value's ETag is not last_etag (at once if it already differs), or
                # after timeout_sec with the value as it is.
                last = query.get("last_etag", [answer[2]])[0]
                deadline = time.monotonic() + float(query.get("timeout_sec", ["3600"])[0])
                while answer is not None and answer[2] == last and time.monotonic() < deadline:
                    time.sleep(0.25)
                    answer = self.answer(parts, query)
            if answer is None:
                self.send(404, b"Not Found\n", flavor)
                return
            body, content_type, etag = answer
            self.send(200, body, {**flavor, "Content-Type": content_type, "ETag": etag})

        def answer(self, parts: list[str], query: dict) -> tuple[bytes, str, str] | None:
            """(body, content type, ETag) of the metadata at PARTS, None where there is none."""
            node = world.metadata()
            for part in parts:
                if not isinstance(node, dict) or part not in node:
                    return None
                node = node[part]
            if query.get("recursive", [""])[0] == "true" or query.get("alt", [""])[0] == "json":
                body, content_type = json.dumps(node).encode(), "application/json"
            elif isinstance(node, dict):
                body = "".join(f"{k}/\n" if isinstance(v, dict) else f"{k}\n" for k, v in node.items()).encode()
                content_type = "text/plain"
            else:
                body, content_type = str(node).encode(), "text/plain"
            return body, content_type, hashlib.sha256(body).hexdigest()[:16]

        # --- Debian: a pass-through to the host's mirror -----------------------------------
        def get_debian(self):
            # The guest's sources name http://deb.debian.org/debian; the host's mirror may be another.
            path = self.path.removeprefix("/debian")
            upstream = world.config["debian_mirror"].rstrip("/") + path
            request = urllib.request.Request(upstream, method=self.command)
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    self.send_response(response.status)
                    for key in ("Content-Type", "Last-Modified", "Content-Length"):
                        if response.headers.get(key):
                            self.send_header(key, response.headers[key])
                    self.end_headers()
                    if self.command != "HEAD":
                        shutil.copyfileobj(response, self.wfile, 1 << 20)
                    world.log(service, self.command, self.path, response.status)
            except urllib.error.HTTPError as error:
                self.send(error.code, b"")

        # --- static trees: the NVIDIA repository, the wheelhouse --------------------------
        def get_static(self, root: Path, prefix: str = ""):
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            if not path.startswith(prefix):
                self.send(404, b"")
                return
            target = (root / path[len(prefix):].lstrip("/")).resolve()
            if not target.is_relative_to(root.resolve()) or not target.exists():
                self.send(404, b"")
            elif target.is_dir():
                links = "".join(f'<a href="{p.name}">{p.name}</a>\n' for p in sorted(target.iterdir()))
                self.send(200, f"<html><body>\n{links}</body></html>\n".encode(), {"Content-Type": "text/html"})
            else:
                size = target.stat().st_size
                self.send_response(200)
                self.send_header("Content-Length", str(size))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                if self.command != "HEAD":
                    with target.open("rb") as f:
                        # The wheels come over the mirror's link (the NVIDIA repository is another host).
                        if service == "wheels":
                            world.mirror.copy(f, self.wfile, size)
                        else:
                            shutil.copyfileobj(f, self.wfile, 1 << 20)
                world.log(service, self.command, path, 200)

        def get_nvidia(self):
            self.get_static(Path(world.config["nvidia_repo"]), world.config["nvidia_prefix"])

        def get_wheels(self):
            self.get_static(Path(world.config["wheelhouse"]))

    return Handler


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def tunnel(listener: socket.socket, netns: str, port: int) -> None:
    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def connect(client: socket.socket) -> None:
        setns(netns)  # this thread only: the guest's loopback
        try:
            guest = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            client.close()
            return
        guest.settimeout(None)
        threading.Thread(target=pump, args=(guest, client), daemon=True).start()
        pump(client, guest)

    while True:
        client, _ = listener.accept()
        threading.Thread(target=connect, args=(client,), daemon=True).start()


def hub_handler(world: World):
    """The Hub's handler: the config's repos, over the mirror's link, logged and cut as the other services are."""
    repos = {repo_id: hub_repo_standin.Repo(repo_id, Path(folder))
             for repo_id, folder in world.config.get("hub_repos", {}).items()}
    return hub_repo_standin.make_handler(repos, world.mirror, lambda method, path, status, _auth: world.log(
        "hub", method, path, status), lambda: world.down("hub"))


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    world = World(config)
    netns = f"/run/netns/{config['netns']}"
    servers = []
    host = os.open("/proc/self/ns/net", os.O_RDONLY)
    setns(netns)
    for service, address, port in (("metadata", "169.254.169.254", 80), ("debian", "127.0.0.2", 80),
                                   ("nvidia", "127.0.0.3", 443), ("wheels", "127.0.0.4", 80),
                                   ("hub", "127.0.0.5", 80)):
        server = Server((address, port), hub_handler(world) if service == "hub" else handler_for(world, service))
        if service == "nvidia":
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(config["tls_cert"], config["tls_key"])
            server.socket = context.wrap_socket(server.socket, server_side=True)
        servers.append(server)
    setns(host)  # back to the host: the pass-through and the tunnel's listener live here
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Thread(target=tunnel, args=(listener, netns, config["guest_port"]), daemon=True).start()
    (world.state / "tunnel-port").write_text(str(listener.getsockname()[1]))
    signal.sigwait({signal.SIGTERM, signal.SIGINT})


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main(sys.argv[1])
