#!/usr/bin/env python3
"""A stand-in for `gcloud compute ssh VM --tunnel-through-iap`, first on PATH in the tests.

What it answers, and where the real gcloud says so:
- `-- -N -o ExitOnForwardFailure=yes ... -L LOCAL:127.0.0.1:REMOTE`: ssh's local forward (ssh(1), -L):
  connections to 127.0.0.1:LOCAL reach the VM's 127.0.0.1:REMOTE. The "VM's loopback" here is
  127.0.0.1:$GCLOUD_STANDIN_VM_PORT. With ExitOnForwardFailure, a LOCAL already taken ends ssh
  with "bind [127.0.0.1]:LOCAL: Address already in use" (OpenSSH's channels.c). A forwarded
  connection to a closed remote port is dropped, ssh saying "channel N: open failed: connect failed:
  Connection refused" (channels.c).
- As gcloud, it runs ssh as a child process (gcloud's ssh.py runs /usr/bin/ssh, whose ProxyCommand is
  gcloud's start-iap-tunnel): here a sleeping child, so a test can see that no process outlives `wait`.
- `--command "nvidia-smi ..."`: one GPU's memory.used, memory.total (nvidia-smi --query-gpu, csv,
  noheader, nounits).
- GCLOUD_STANDIN_LOGGED_OUT=1: gcloud with no active account, its own message
  (googlecloudsdk/core/credentials/store.py, NoActiveAccountException) and exit 1.
- GCLOUD_STANDIN_VM_STATE=FILE: the VM's life, a JSON document the test rewrites as it goes:
  {"sshd": true|false, "boot": N, "iap": "ok"|"not-authorized"}. While sshd is down IAP answers 4003;
  an account without the IAP role gets 4033; the texts are gcloud's as published transcripts show them
  (IAP_TRANSCRIPT below). A tunnel that is open when sshd stops or the VM boots again ends as ssh
  ends a session whose far end closed ("Connection to HOST closed by remote host.", clientloop.c),
  and gcloud reports ssh's exit 255.
- GCLOUD_STANDIN_NO_KEY=1: no SSH key yet. Without --quiet gcloud says so and ssh-keygen asks for a
  passphrase (the published first-run transcripts: "WARNING: You do not have an SSH key for gcloud."
  ... "Enter passphrase (empty for no passphrase):"), reading stdin; with --quiet it asks nothing.
- `--command "sudo journalctl ..."` with GCLOUD_STANDIN_JOURNAL=FILE (JSON lines {"t": epoch, "m": text}):
  the service's journal as journalctl prints it (-n, --since @EPOCH, -f; journalctl(1)).
- GCLOUD_STANDIN_LOG=FILE: one line per run (what it did), for the tests to follow.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time

NO_ACCOUNT = ("ERROR: (gcloud.compute.ssh) You do not currently have an active account selected.\n"
              "Please run:\n\n  $ gcloud auth login\n\nto obtain new credentials.\n\n"
              "If you have already logged in with a different account, run:\n\n"
              "  $ gcloud config set account ACCOUNT\n\nto select an already authenticated account to use.\n")

# `gcloud compute ssh --tunnel-through-iap` when IAP refuses the connection: the 4033 transcript in
# NVIDIA/spark-rapids-tools' bootstrap test; the 4003 code and text from hashicorp/packer#13164 and
# terraform-google-modules/terraform-google-bastion-host#58.
IAP_TRANSCRIPT = (
    "ERROR: (gcloud.compute.start-iap-tunnel) Error while connecting [{code}].\n"
    "kex_exchange_identification: Connection closed by remote host\n"
    "Connection closed by UNKNOWN port 65535\n\n"
    "Recommendation: To check for possible causes of SSH connectivity issues and get\n"
    "recommendations, rerun the ssh command with the --troubleshoot option.\n\n"
    "ERROR: (gcloud.compute.ssh) [/usr/bin/ssh] exited with return code [255].\n")
IAP_4003 = "4003: 'failed to connect to backend'"
IAP_4033 = "4033: 'not authorized'"
CLOSED = ("Connection to compute.4819372561234567890 closed by remote host.\n"
          "ERROR: (gcloud.compute.ssh) [/usr/bin/ssh] exited with return code [255].\n")
NO_KEY = ("WARNING: The private SSH key file for gcloud does not exist.\n"
          "WARNING: The public SSH key file for gcloud does not exist.\n"
          "WARNING: You do not have an SSH key for gcloud.\n"
          "WARNING: SSH keygen will be executed to generate a key.\n"
          "Generating public/private rsa key pair.\n")
PASSPHRASE = "Enter passphrase (empty for no passphrase): "


def log(line: str) -> None:
    if path := os.environ.get("GCLOUD_STANDIN_LOG"):
        with open(path, "a") as out:
            out.write(f"{line}\n")


def vm_state() -> dict:
    path = os.environ.get("GCLOUD_STANDIN_VM_STATE")
    if not path:
        return {"sshd": True, "boot": 0, "iap": "ok"}
    for _ in range(20):  # the test may be rewriting it
        with contextlib.suppress(ValueError, OSError), open(path) as state:
            return {"sshd": True, "boot": 0, "iap": "ok", **json.load(state)}
        time.sleep(0.05)
    raise SystemExit(f"unreadable {path}")


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
    channel = 2

    def handle(self) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", int(os.environ["GCLOUD_STANDIN_VM_PORT"])))
        except OSError:
            Forward.channel += 1
            sys.stderr.write(f"channel {Forward.channel}: open failed: connect failed: Connection refused\n")
            return
        back = threading.Thread(target=_pipe, args=(upstream, self.request), daemon=True)
        back.start()
        _pipe(self.request, upstream)
        back.join()
        upstream.close()


def forward(argv: list[str]) -> int:
    if os.environ.get("GCLOUD_STANDIN_NO_KEY") and "--quiet" not in argv:
        sys.stderr.write(NO_KEY + PASSPHRASE)
        sys.stderr.flush()
        log("prompted for a passphrase")
        sys.stdin.readline()  # a terminal's stdin waits here for a person
    state = vm_state()
    if state["iap"] == "not-authorized" or not state["sshd"]:
        code = IAP_4033 if state["iap"] == "not-authorized" else IAP_4003
        log(f"refused {code}")
        sys.stderr.write(IAP_TRANSCRIPT.format(code=code))
        return 255
    local = int(argv[argv.index("-L") + 1].split(":", 1)[0])
    socketserver.ThreadingTCPServer.allow_reuse_address = False
    try:
        server = socketserver.ThreadingTCPServer(("127.0.0.1", local), Forward)
    except OSError:
        sys.stderr.write(f"bind [127.0.0.1]:{local}: Address already in use\n"
                         f"channel_setup_fwd_listener_tcpip: cannot listen to port: {local}\n"
                         "Could not request local forwarding.\n")
        return 255
    ssh = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    log(f"open port={local} gcloud={os.getpid()} ssh={ssh.pid}")
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        while (now := vm_state())["sshd"] and now["boot"] == state["boot"]:
            time.sleep(0.1)
    finally:
        ssh.kill()
        ssh.wait()
    server.shutdown()
    server.server_close()
    log("closed by remote host")
    sys.stderr.write(CLOSED)
    return 255


def journal_entries() -> list[dict]:
    with open(os.environ["GCLOUD_STANDIN_JOURNAL"]) as entries:
        return [json.loads(line) for line in entries if line.strip()]


def journal(words: list[str]) -> int:
    """journalctl(1) on the VM: -n N (the last N entries), --since @EPOCH (entries from then on), -f
    (and then each new one), in the short output format (MMM DD HH:MM:SS HOST IDENT[PID]: MESSAGE).
    A follow ends as the session does when the VM reboots."""
    def show(entry: dict) -> None:
        stamp = time.strftime("%b %d %H:%M:%S", time.localtime(entry["t"]))
        print(f"{stamp} gemma4-t4-vm vllm[1234]: {entry['m']}", flush=True)

    entries = journal_entries()
    if "--since" in words:
        since = int(words[words.index("--since") + 1].lstrip("@"))
        shown = [entry for entry in entries if entry["t"] >= since]
    else:
        shown = entries[-int(words[words.index("-n") + 1]):]
    for entry in shown:
        show(entry)
    if "-f" not in words:
        return 0
    boot, seen = vm_state()["boot"], len(entries)
    log("journal following")
    while (now := vm_state())["sshd"] and now["boot"] == boot:
        entries = journal_entries()
        for entry in entries[seen:]:
            show(entry)
        seen = len(entries)
        time.sleep(0.1)
    log("closed by remote host")
    sys.stderr.write(CLOSED)
    return 255


def main(argv: list[str]) -> int:
    if os.environ.get("GCLOUD_STANDIN_LOGGED_OUT"):
        sys.stderr.write(NO_ACCOUNT)
        return 1
    if "--command" in argv:
        if not vm_state()["sshd"]:
            log(f"refused {IAP_4003}")
            sys.stderr.write(IAP_TRANSCRIPT.format(code=IAP_4003))
            return 255
        command = argv[argv.index("--command") + 1]
        if command.startswith("sudo journalctl"):
            return journal(command.split())
        print("1234, 15360")
        return 0
    return forward(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
