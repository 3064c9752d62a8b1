"""The guest's side of hfToken: hf_token.py reads the token from Secret Manager as the VM's service account (against
a loopback stand-in of the metadata server's token endpoint and Secret Manager's access call), and serve.sh hands
it to vLLM's environment only while vLLM may need the Hub, never printing it."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from conftest import REPO

SCRIPTS = REPO / "cloudinit" / "scripts"
TOKEN = "hf_" + "g" * 34  # the shape of a Hugging Face user access token
SECRET = "projects/my-project/secrets/gemma4-t4-gce-t4-hf-token"
ACCESS = "ya29.c.stand-in-access-token"


class _Google(BaseHTTPRequestHandler):
    """The metadata server's token endpoint and Secret Manager's versions.access, as they answer.
    source: Compute Engine, "Authenticate workloads using service accounts" (GET .../service-accounts/default/token
    with Metadata-Flavor: Google answers {"access_token", "expires_in", "token_type": "Bearer"}); Secret Manager
    REST reference, projects.secrets.versions.access (AccessSecretVersionResponse {"name", "payload": {"data":
    base64, "dataCrc32c"}}); a denied call is Google's JSON error with the message a Secret Manager client shows
    (google-marketing-solutions/causmos#43: "Permission 'secretmanager.versions.access' denied for resource
    'projects/.../secrets/.../versions/latest' (or it may not exist)")."""

    world: ClassVar[dict] = {}

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.endswith("/service-accounts/default/token"):
            if self.headers.get("Metadata-Flavor") != "Google" or not self.world.get("account", True):
                return self._send(404, {})
            return self._send(200, {"access_token": ACCESS, "expires_in": 3599, "token_type": "Bearer"})
        name = self.path.removeprefix("/v1/").removesuffix("/versions/latest:access")
        if self.headers.get("Authorization") != f"Bearer {ACCESS}" or not self.world.get("granted", True):
            return self._send(403, {"error": {"code": 403, "status": "PERMISSION_DENIED", "message":
                                              f"Permission 'secretmanager.versions.access' denied for resource "
                                              f"'{name}/versions/latest' (or it may not exist)."}})
        data = base64.b64encode(self.world.get("token", TOKEN).encode()).decode()
        return self._send(200, {"name": f"{name}/versions/1", "payload": {"data": data, "dataCrc32c": "1234"}})

    def log_message(self, *args):
        pass


@pytest.fixture
def google():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Google)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Google.world = {}
    yield f"http://127.0.0.1:{server.server_port}", _Google.world
    server.shutdown()


@pytest.fixture
def hf_token(google, monkeypatch):
    spec = importlib.util.spec_from_file_location("hf_token", SCRIPTS / "hf_token.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    url, world = google
    monkeypatch.setattr(module, "TOKEN_URL", f"{url}/computeMetadata/v1/instance/service-accounts/default/token")
    monkeypatch.setattr(module, "SECRET_MANAGER", f"{url}/v1")
    return module, world


def test_the_token_is_read_as_the_vms_service_account(hf_token, capsys):
    module, _ = hf_token
    assert module.main([SECRET]) == 0
    assert capsys.readouterr().out == f"{TOKEN}\n"


def test_a_denied_secret_says_what_to_grant_and_prints_no_token(hf_token, capsys):
    module, world = hf_token
    world["granted"] = False
    assert module.main([SECRET]) == 1
    said = capsys.readouterr()
    assert said.out == "" and "Permission 'secretmanager.versions.access' denied" in said.err
    assert "roles/secretmanager.secretAccessor" in said.err


def test_a_vm_without_a_service_account_says_so(hf_token, capsys):
    module, world = hf_token
    world["account"] = False
    assert module.main([SECRET]) == 1
    assert "answered 404" in capsys.readouterr().err


def test_an_empty_token_is_refused(hf_token, capsys):
    module, world = hf_token
    world["token"] = "\n"
    assert module.main([SECRET]) == 1
    assert "holds an empty token" in capsys.readouterr().err


# --- serve.sh hands it to vLLM ---------------------------------------------------------------------


def _serve(tmp_path, helper: str, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    """serve.sh beside a stand-in hf_token.py (HELPER: its body), with a venv whose `-m vllm...` records the
    environment vLLM would get."""
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(SCRIPTS / "serve.sh", lib / "serve.sh")
    (lib / "hf_token.py").write_text(helper)
    seen = tmp_path / "vllm-env.json"
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = -m ]; then exec {sys.executable} -c "import json, os; '
                      f'json.dump(dict(os.environ), open({str(seen)!r}, \'w\'))"; fi\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    full = {"PATH": os.environ["PATH"], "VENV": str(venv), "HF_HOME": str(tmp_path / "hf"),
            "VLLM_ARGS": "--model google/gemma-4-E2B-it", **env}
    done = subprocess.run(["bash", str(lib / "serve.sh")], env=full, capture_output=True, text=True, timeout=60)
    return done, (json.loads(seen.read_text()) if seen.exists() else {})


HELPER = f"import sys\nopen(sys.argv[0] + '.called', 'w').write(sys.argv[1])\nprint({TOKEN!r})\n"


def test_serve_hands_the_token_to_vllm_only_and_prints_it_nowhere(tmp_path):
    done, vllm_env = _serve(tmp_path, HELPER, HF_TOKEN_SECRET=SECRET)
    assert done.returncode == 0, done.stderr
    assert vllm_env["HF_TOKEN"] == TOKEN
    assert (tmp_path / "lib" / "hf_token.py.called").read_text() == SECRET
    assert TOKEN not in done.stdout + done.stderr


def test_serve_asks_for_no_token_when_the_hub_is_not_asked(tmp_path):
    """A model whole on the data disk is served offline (HF_HUB_OFFLINE=1): no call to Secret Manager, so a reboot
    without network serves as before."""
    done, vllm_env = _serve(tmp_path, HELPER, HF_TOKEN_SECRET=SECRET, HF_HUB_OFFLINE="1")
    assert done.returncode == 0, done.stderr
    assert "HF_TOKEN" not in vllm_env and not (tmp_path / "lib" / "hf_token.py.called").exists()
    (tmp_path / "none").mkdir()
    done, vllm_env = _serve(tmp_path / "none", HELPER)
    assert done.returncode == 0 and "HF_TOKEN" not in vllm_env, "no secret, no token"


def test_a_token_that_cannot_be_read_starts_no_vllm(tmp_path):
    done, vllm_env = _serve(tmp_path, "import sys\nsys.exit('hf-token: denied')\n", HF_TOKEN_SECRET=SECRET)
    assert done.returncode == 1 and vllm_env == {}
    assert "the Hub token could not be read" in done.stderr
