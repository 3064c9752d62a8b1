"""One error boundary: every command meets the failures users meet (no credentials, expired
credentials, no network, a bad path, Ctrl-C) with one line and the documented exit code, never a
traceback. Each failure is raised where the real client raises it: google-auth's credentials
loader and refresh, botocore's API call, httpx's connection, the file system."""

from __future__ import annotations

import json

import pytest
from conftest import free_port

from gemma4_t4 import cli, clouds
from gemma4_t4.cli import output
from gemma4_t4.clouds.gce import lifecycle
from gemma4_t4.core import failures, fit

GCE_COMMANDS = [("preflight", "gce-t4", "--project", "p"), ("preflight", "gce-t4", "--project", "p", "--all-regions"),
                ("stop", "--instance", "vm", "--zone", "us-west2-b", "--project", "p", "--timeout", "0"),
                ("start", "--instance", "vm", "--zone", "us-west2-b", "--project", "p", "--timeout", "0")]
AWS_WHERE = ("--endpoint", "gemma4-t4-endpoint", "--region", "us-east-1")
AWS_COMMANDS = [("status", *AWS_WHERE), ("wait", *AWS_WHERE, "--timeout", "0"), ("query", "hi", *AWS_WHERE),
                ("logs", *AWS_WHERE), ("bench", "run", *AWS_WHERE, "--questions", "1"),
                ("preflight", "sagemaker-t4"), ("preflight", "sagemaker-t4", "--all-regions", "--regions", "us-east-1")]


def gemma4_t4(capsys, *args: str, one_line: bool = True) -> tuple[int, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and (len(err.strip().splitlines()) == 1 or not one_line), err
    return code, err if one_line else out + err


# --- Google: the loader finds nothing, the refresh is refused, the network is down ---------------------


def _credentials(error: Exception):
    from google.auth import credentials

    class Expired(credentials.Credentials):
        def refresh(self, request):
            raise error

    return Expired()


def _google_failure(kind: str, monkeypatch):
    import google.auth
    from google.auth import exceptions

    if kind == "none":
        # google.auth.default's own error when it finds no credentials (google/auth/_default.py).
        def default(*args, **kwargs):
            raise exceptions.DefaultCredentialsError(
                "Your default credentials were not found. To set up Application Default Credentials, see "
                "https://cloud.google.com/docs/authentication/external/set-up-adc for more information.")
    elif kind == "valid":  # credentials that work: the failure is the API's answer
        def default(*args, **kwargs):
            from google.auth.credentials import AnonymousCredentials

            return AnonymousCredentials(), "p"
    else:
        error = (exceptions.RefreshError(  # google/oauth2/reauth.py, when the session needs a new login
            "Reauthentication is needed. Please run `gcloud auth application-default login` to reauthenticate.")
            if kind == "expired" else
            # google/auth/transport/requests.py wraps the connection failure of a token refresh.
            exceptions.TransportError("HTTPSConnectionPool(host='oauth2.googleapis.com', port=443): Max retries "
                                      "exceeded with url: /token"))

        def default(*args, **kwargs):
            return _credentials(error), "p"
    monkeypatch.setattr(google.auth, "default", default)


@pytest.mark.parametrize("kind,fragment,fix", [
    ("none", "no Google credentials", "gcloud auth application-default login"),
    ("expired", "have expired", "gcloud auth application-default login"),
    ("offline", "cannot reach Google's servers", "check the network")])
@pytest.mark.parametrize("args", GCE_COMMANDS, ids=" ".join)
def test_google_failures_are_one_line(args, kind, fragment, fix, monkeypatch, capsys):
    _google_failure(kind, monkeypatch)
    code, err = gemma4_t4(capsys, *args)
    assert code == output.EXIT_FAILED and fragment in err and fix in err


# --- AWS: no credentials, no network, an expired session token ----------------------------------------


@pytest.fixture
def aws(monkeypatch, tmp_path):
    for key in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    def fail_with(error: Exception | None):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
        from botocore.client import BaseClient

        def call(self, operation, params):
            raise error

        monkeypatch.setattr(BaseClient, "_make_api_call", call)

    return fail_with


def _aws_error(kind: str) -> Exception:
    from botocore.exceptions import ClientError, EndpointConnectionError

    if kind == "offline":  # botocore/endpoint.py, when the connection cannot be made
        return EndpointConnectionError(endpoint_url="https://api.sagemaker.us-east-1.amazonaws.com/")
    # AWS's answer to an expired session token (STS-issued credentials), as botocore parses it.
    return ClientError({"Error": {"Code": "ExpiredTokenException",
                                  "Message": "The security token included in the request is expired"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, "DescribeEndpoint")


@pytest.mark.parametrize("kind,fragment,fix", [("none", "no AWS credentials", "aws "),
                                               ("offline", "cannot reach", "check the network"),
                                               ("expired", "expired", "aws sso login")])
@pytest.mark.parametrize("args", AWS_COMMANDS, ids=" ".join)
def test_aws_failures_are_one_line(args, kind, fragment, fix, aws, capsys):
    if kind != "none":
        aws(_aws_error(kind))
    if "--regions" in args and kind == "offline":  # each region's row says why it could not be asked
        code, out = gemma4_t4(capsys, *args, "--json", one_line=False)
        err = json.loads(out)["rows"][0]["detail"]
    else:
        code, err = gemma4_t4(capsys, *args)
    assert code == output.EXIT_FAILED and fragment in err and fix in err


# --- no server, a bad path, Ctrl-C ------------------------------------------------------------------------

URL_COMMANDS = [("status",), ("wait", "--timeout", "0"), ("query", "hi"), ("logs",), ("bench", "run", "--questions", "1")]


@pytest.mark.parametrize("args", URL_COMMANDS, ids=" ".join)
def test_no_server_is_one_line(args, capsys):
    # status answers "NOT serving" with its reason on stdout; wait adds where to look next.
    code, _ = gemma4_t4(capsys, *args, "--url", f"http://127.0.0.1:{free_port()}",
                          one_line=args[0] not in ("status", "wait"))
    # logs: a URL has no log whether a server is there or not, the caller's to fix.
    assert code == (output.EXIT_USAGE if args[0] == "logs" else output.EXIT_FAILED)


@pytest.mark.parametrize("args", [("plan", "gce-t4", "--user-data", "/nonexistent/folder/user-data.yaml"),
                                  ("plan", "gce-t4", "--project-dir", "/nonexistent"),
                                  ("cost", "gce-t4", "--project-dir", "/nonexistent"),
                                  ("preflight", "gce-t4", "--project-dir", "/nonexistent"),
                                  ("bench", "compare", "/nonexistent/a.json", "/nonexistent/b.json")], ids=" ".join)
def test_a_bad_path_is_one_line(args, capsys):
    code, err = gemma4_t4(capsys, *args)
    assert code == output.EXIT_USAGE and "/nonexistent" in err


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("args", [("plan", "gce-t4"), ("cost", "gce-t4"), ("preflight", "gce-t4"), ("fit",),
                                  ("status", "--url", "http://127.0.0.1:1"), ("wait", "-s", "gce-t4"),
                                  ("query", "hi", "-s", "gce-t4"), ("logs", "-s", "gce-t4"),
                                  ("bench", "run", "-s", "gce-t4"), ("stop", "-s", "gce-t4"),
                                  ("start", "--instance", "vm", "--zone", "z", "--project", "p"), ("mcp",)],
                         ids=" ".join)
def test_ctrl_c_anywhere_is_one_line_and_130(args, monkeypatch, capsys):
    from gemma4_t4.mcp import server

    for owner, name in ((clouds, "plan_stack"), (clouds, "resolve_target"), (clouds, "vm_from_stack"),
                        (lifecycle, "Compute"), (fit, "run"), (server, "serve")):
        monkeypatch.setattr(owner, name, _interrupt)
    code, err = gemma4_t4(capsys, *args)
    assert code == output.EXIT_INTERRUPTED and err.strip() == "interrupted"


def test_a_bug_is_one_line_and_its_traceback_only_with_debug(monkeypatch, capsys):
    def bug(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(clouds, "resolve_target", bug)
    code, err = gemma4_t4(capsys, "status", "--url", "http://127.0.0.1:1")
    assert code == output.EXIT_FAILED and "--debug" in err
    assert cli.main(["status", "--url", "http://127.0.0.1:1", "--debug"]) == output.EXIT_FAILED
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv(failures.DEBUG_ENV, "1")
    cli.main(["status", "--url", "http://127.0.0.1:1"])
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("error", ["refresh", "no-aws", "path"])
def test_mcp_tools_pass_failures_through_the_same_boundary(error):
    import anyio
    from botocore.exceptions import NoCredentialsError
    from google.auth.exceptions import RefreshError
    from mcp.server.mcpserver.exceptions import ToolError

    from gemma4_t4.mcp import calls

    raised = {"refresh": RefreshError("Reauthentication is needed. Please run `gcloud auth application-default "
                                      "login` to reauthenticate."),
              "no-aws": NoCredentialsError(), "path": FileNotFoundError(2, "No such file", "/nonexistent/a.json")}

    def fail():
        raise raised[error]

    with pytest.raises(ToolError) as caught:
        anyio.run(calls.in_thread, fail)
    assert str(caught.value) == clouds.explain(raised[error]).message


INTERRUPTED_PLAN = """
import sys
from gemma4_t4 import cli
from gemma4_t4.core import plan

def program():
    raise KeyboardInterrupt  # Ctrl-C while Pulumi's runtime runs the stack program

plan._stack_program = program
sys.exit(cli.main(["plan", "gce-t4"]))
"""


def test_ctrl_c_inside_pulumis_runtime_leaves_no_task_tracebacks():
    """The interrupt reaches the command once ("interrupted", 130), and the program's tasks,
    collected at exit, print nothing (asyncio's "Task exception was never retrieved", each with
    a traceback)."""
    import subprocess
    import sys

    from conftest import REPO

    result = subprocess.run([sys.executable, "-c", INTERRUPTED_PLAN], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == output.EXIT_INTERRUPTED and result.stderr.strip() == "interrupted", result.stderr


# Google's 403 for an API the project has not enabled (reason SERVICE_DISABLED), as Compute Engine's
# REST API words it for a new project; google-api-core raises it as Forbidden.
SERVICE_DISABLED = ("Compute Engine API has not been used in project 123456789012 before or it is disabled. Enable "
                    "it by visiting https://console.developers.google.com/apis/api/compute.googleapis.com/overview?"
                    "project=123456789012 then retry. If you enabled this API recently, wait a few minutes for the "
                    "action to propagate to our systems and retry.")


@pytest.mark.parametrize("args", GCE_COMMANDS, ids=" ".join)
def test_an_api_the_project_has_off_is_named_with_its_enable_line(args, monkeypatch, capsys):
    from google.api_core import exceptions
    from google.cloud import compute_v1

    def forbidden(*args, **kwargs):
        raise exceptions.Forbidden(SERVICE_DISABLED)

    for client in (compute_v1.RegionsClient, compute_v1.ProjectsClient, compute_v1.InstancesClient):
        for method in ("get", "list", "stop", "start"):
            if hasattr(client, method):
                monkeypatch.setattr(client, method, forbidden)
    _google_failure("valid", monkeypatch)
    code, err = gemma4_t4(capsys, *args)
    assert code == output.EXIT_FAILED
    assert "gcloud services enable compute.googleapis.com --project 123456789012" in err


# --- one failure contract: every command, a representative failure each ---------------------------------
# Exit 0 ok / 1 the operation failed / 2 usage or config / 130 interrupted; one line on stderr; with --json
# the failure document on stdout (docs/json.md, "Exit codes and failures").

# Pulumi's own error for a stack its backend does not have (pkg/cmd/pulumi: `no stack named '%s' found`),
# printed as `error: ...` on stderr; the CLI exits non-zero.
NO_STACK = "error: no stack named 'gce-t4' found\n"
# nginx's page for a 502 (src/http/ngx_http_special_response.c, ngx_http_error_502_page and its tail), as a
# proxy in front of a server that is down answers.
NGINX_502 = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
             "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")


@pytest.fixture
def places(tmp_path, monkeypatch):
    """The places the failures come from: a project whose stack file is not YAML, one without gcp:project,
    a `pulumi` that has no such stack, no `pulumi` at all, a proxy answering 502 with its HTML page."""
    import http.server
    import shutil
    import threading

    from conftest import REPO

    malformed = tmp_path / "malformed"
    malformed.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", malformed)
    (malformed / "Pulumi.gce-t4.yaml").write_text("config:\n  gemma4-t4:model: [google/gemma-4-E2B-it\n")
    no_project = tmp_path / "no-project"
    no_project.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", no_project)
    (no_project / "Pulumi.gce-t4.yaml").write_text("config: {}\n")
    fake_bin, empty_bin = tmp_path / "bin", tmp_path / "empty"
    fake_bin.mkdir()
    empty_bin.mkdir()
    pulumi = fake_bin / "pulumi"
    pulumi.write_text(f"#!/bin/sh\nprintf %s \"{NO_STACK}\" >&2\nexit 255\n")
    pulumi.chmod(0o755)

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = NGINX_502.encode()
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"MALFORMED": str(malformed), "NO_PROJECT": str(no_project), "EMPTY": str(empty_bin),
           "PROXY": f"http://127.0.0.1:{server.server_address[1]}", "FAKE_BIN": str(fake_bin)}
    server.shutdown()


# (command line, which `pulumi` is on PATH, exit code, fragment of the one line, kind in the --json document)
CONTRACT = [
    (("plan", "gce-t4", "--project-dir", "MALFORMED"), None, 2, "Pulumi.gce-t4.yaml: not valid YAML at line 3",
     "usage"),
    (("cost", "gce-t4", "--project-dir", "MALFORMED"), None, 2, "Pulumi.gce-t4.yaml: not valid YAML at line 3",
     "usage"),
    (("preflight", "gce-t4", "--project-dir", "NO_PROJECT"), None, 2,
     "gcp:project: is not set", "config"),
    (("fit", "--project-dir", "NO_PROJECT"), None, 1, "no fit environment", "target"),
    (("status", "-s", "gce-t4"), "fake", 1, "error: no stack named 'gce-t4' found", "target"),
    (("wait", "-s", "gce-t4"), "fake", 1, "error: no stack named 'gce-t4' found", "target"),
    (("query", "hi", "--url", "PROXY"), None, 1, "/v1/models: HTTP 502: 502 Bad Gateway", "target"),
    (("logs", "--url", "PROXY"), None, 2, "a plain URL has no log to read", None),
    (("logs", "-s", "gce-t4"), "none", 1, "or pass --endpoint NAME --region REGION", None),
    (("status", "-s", "gce-t4"), "none", 1, "or pass --url URL, or --endpoint NAME --region REGION", "target"),
    (("query", "hi", "--url", "localhost:8000"), None, 2, "has no scheme: give http://localhost:8000", "usage"),
    (("bench", "run", "--url", "PROXY", "--questions", "1"), None, 1, "HTTP 502: 502 Bad Gateway", "target"),
    (("bench", "compare", "/nonexistent/a.json", "/nonexistent/b.json"), None, 2, "/nonexistent/a.json: no such file",
     "usage"),
    (("stop", "-s", "gce-t4"), "none", 1, "or pass --instance NAME --zone ZONE --project PROJECT", "target"),
    (("start", "--instance", "vm"), None, 2, "--instance needs --zone and --project", "usage"),
    (("mcp", "--transport", "carrier-pigeon"), None, 2, "invalid choice: 'carrier-pigeon'", None),
    (("status", "--url", "PROXY", "--intervall", "5"), None, 2, "unrecognized arguments: --intervall", "usage"),
]


@pytest.mark.parametrize("args,pulumi,code,fragment,kind", CONTRACT, ids=[" ".join(c[0]) for c in CONTRACT])
def test_every_command_fails_by_the_one_contract(args, pulumi, code, fragment, kind, places, monkeypatch, capsys):
    import importlib.util
    import os

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",  # fit: this machine's vLLM, if any, is not the point here
                        lambda name, *a: None if name == "vllm" else real_find_spec(name, *a))
    if pulumi == "fake":
        monkeypatch.setenv("PATH", f"{places['FAKE_BIN']}{os.pathsep}{os.environ['PATH']}")
    elif pulumi == "none":
        monkeypatch.setenv("PATH", places["EMPTY"])
    argv = [places.get(a, a) for a in args]
    assert cli.main(argv) == code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in err, err
    assert out == ""
    if kind is None:  # logs and mcp print no document: they take no --json
        return
    assert cli.main([*argv, "--json"]) == code
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["schema_version"] == output.SCHEMA_VERSION and document["ok"] is False
    assert document["error"]["kind"] == kind and document["error"]["exit_code"] == code
    assert fragment in document["error"]["message"] and err.strip().endswith(document["error"]["message"])


def test_a_clients_page_is_one_line_and_whole_only_under_verbose(places, capsys):
    assert cli.main(["query", "hi", "--url", places["PROXY"]]) == 1
    assert "<html>" not in capsys.readouterr().err
    assert cli.main(["query", "hi", "--url", places["PROXY"], "--verbose"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0].endswith("HTTP 502: 502 Bad Gateway") and "<center>nginx</center>" in err
    assert cli.main(["query", "hi", "--url", places["PROXY"], "--json"]) == 1
    assert "<center>nginx</center>" in json.loads(capsys.readouterr().out)["error"]["detail"]


def test_gclouds_long_answer_is_cut_to_its_cause():
    """gcloud's 8 lines when IAP refuses a tunnel (tests/gcloud_standin.py, with its sources): the line kept
    is gcloud's first ERROR, not its advice or ssh's echo."""
    from gcloud_standin import IAP_TRANSCRIPT

    from gemma4_t4.core.targets import cause

    assert cause(IAP_TRANSCRIPT.format(code="4033: 'not authorized'")) == (
        "ERROR: (gcloud.compute.start-iap-tunnel) Error while connecting [4033: 'not authorized'].")


@pytest.mark.parametrize("body,line", [
    # vLLM's ErrorResponse (vllm/entrypoints/openai/protocol.py: `error: ErrorInfo` with message, type, param,
    # code), and FastAPI's default for an unknown route ({"detail": "Not Found"}).
    ({"error": {"message": "The model `gemma` does not exist.", "type": "NotFoundError", "param": None,
                "code": 404}}, "HTTP 404 Not Found: The model `gemma` does not exist."),
    ({"detail": "Not Found"}, "HTTP 404: Not Found")])
def test_a_servers_json_error_keeps_its_own_words_on_one_line(body, line):
    import httpx

    from gemma4_t4.core.targets import http_cause

    assert http_cause(httpx.Response(404, json=body)) == line
