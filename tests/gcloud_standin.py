#!/usr/bin/env python3
"""A stand-in for `gcloud compute ssh VM --tunnel-through-iap`, first on PATH in the tests.

What it answers, and where the real gcloud says so:
- `-- -N -o ExitOnForwardFailure=yes -L LOCAL:127.0.0.1:REMOTE`: ssh's local forward (ssh(1), -L):
  connections to 127.0.0.1:LOCAL reach the VM's 127.0.0.1:REMOTE. The "VM's loopback" here is
  127.0.0.1:$GCLOUD_STANDIN_VM_PORT. With ExitOnForwardFailure, a LOCAL already taken ends ssh
  with "bind [127.0.0.1]:LOCAL: Address already in use" (OpenSSH's channels.c).
- `--command "nvidia-smi ..."`: one GPU's memory.used, memory.total (nvidia-smi --query-gpu, csv,
  noheader, nounits).
- GCLOUD_STANDIN_LOGGED_OUT=1: gcloud with no active account, its own message
  (googlecloudsdk/core/credentials/store.py, NoActiveAccountException) and exit 1.
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import sys
import threading

NO_ACCOUNT = ("ERROR: (gcloud.compute.ssh) You do not currently have an active account selected.\n"
              "Please run:\n\n  $ gcloud auth login\n\nto obtain new credentials.\n\n"
              "If you have already logged in with a different account, run:\n\n"
              "  $ gcloud config set account ACCOUNT\n\nto select an already authenticated account to use.\n")


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class Forward(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        upstream = socket.create_connection(("127.0.0.1", int(os.environ["GCLOUD_STANDIN_VM_PORT"])))
        back = threading.Thread(target=_pipe, args=(upstream, self.request), daemon=True)
        back.start()
        _pipe(self.request, upstream)
        back.join()
        upstream.close()


def main(argv: list[str]) -> int:
    if os.environ.get("GCLOUD_STANDIN_LOGGED_OUT"):
        sys.stderr.write(NO_ACCOUNT)
        return 1
    if "--command" in argv:
        print("1234, 15360")
        return 0
    local = int(argv[argv.index("-L") + 1].split(":", 1)[0])
    socketserver.ThreadingTCPServer.allow_reuse_address = False
    try:
        server = socketserver.ThreadingTCPServer(("127.0.0.1", local), Forward)
    except OSError:
        sys.stderr.write(f"bind [127.0.0.1]:{local}: Address already in use\n"
                         f"channel_setup_fwd_listener_tcpip: cannot listen to port: {local}\n"
                         "Could not request local forwarding.\n")
        return 255
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
