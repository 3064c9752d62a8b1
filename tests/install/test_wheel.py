"""What a Pulumi user gets from `pip install`: both wheels (gemma4-t4 and the clamp it pins) into an empty
virtualenv outside this checkout, resolved from the index as any user's would be; then the Python example
(examples/python: two GceT4Servers on the program's own network, a SageMakerT4Endpoint through an explicit
AWS provider) runs under the kind of mocks a user writes, and the guest it renders is the stack program's.
The installed CLI plans the shipped stacks from an empty directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import docs_examples
import pytest
import yaml
from conftest import REPO

from gemma4_t4 import clouds

pytestmark = [pytest.mark.build, pytest.mark.index]

# The end of every runner: the user's program (examples/python/__main__.py) under MOCKS, then what it registered.
RUN_PROGRAM = '''
pulumi.runtime.set_mocks({mocks}(), project="two-servers", stack="test", preview=False)

@pulumi.runtime.test
def run():
    runpy.run_path("__main__.py", run_name="__main__")
    return pulumi.Output.from_input(1)

run()
print(json.dumps(registered, default=str))
'''

# A user's unit test of the example, as Pulumi's testing guide writes one: mocks that echo the inputs and
# answer the provider functions the components call. getRegion answers with the region of the provider it is
# asked through, as the AWS provider's aws_region data source does without arguments (it reads its own
# configuration: terraform-provider-aws, internal/service/meta/region_data_source.go). getDisk answers that no
# retained disk exists as the provider does, with an error (source: terraform-provider-google,
# data_source_google_compute_disk.go:58-59 at e03b7622, `fmt.Errorf("%s not found", id)`; an answer of {}
# is refused), as a mock fails an invoke: with a failure, which the SDK raises as "invoke of TOKEN failed: ...".
# pulumi-command's local run answers with its inputs, the command's stdout and stderr (pulumi/pulumi-command v1.2.1,
# provider/pkg/provider/local/runController.go): the SageMaker component reads its endpoint's creation time so.
RUNNER = '''
import json, runpy, sys
import pulumi

providers, registered = {}, []

class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        registered.append({"type": args.typ, "name": args.name, "inputs": args.inputs})
        if args.typ.startswith("pulumi:providers:"):
            providers[args.name] = args.inputs
        return [args.name + "-id", {**args.inputs, "name": args.inputs.get("name", args.name),
                                    "arn": "arn:aws:x:us-east-2:123456789012:" + args.name,
                                    "repositoryUrl": "123456789012.dkr.ecr.us-east-2.amazonaws.com/" + args.name,
                                    "stdout": "2030-01-01T00:00:00Z"}]

    def call(self, args):
        if args.token == "aws:index/getRegion:getRegion":
            name = args.provider.split("::")[3]
            return {"name": providers[name]["region"], "region": providers[name]["region"]}
        if args.token == "gcp:compute/getDisk:getDisk":
            # A mock fails an invoke by returning (result, [(property, reason)]); raising would crash the program.
            return {}, [("", "projects/my-project/zones/%s/disks/%s not found" % (args.args["zone"], args.args["name"]))]
        if args.token == "command:local:run":
            # The SageMaker endpoint's creation time, read with pulumi-command's local run once it exists.
            return {**args.args, "stdout": "2030-01-01T00:00:00Z", "stderr": ""}
        return {}

''' + RUN_PROGRAM.format(mocks="Mocks")


def _user_env() -> dict[str, str]:
    """This process's environment without the checkout on PYTHONPATH: the user's venv sees what it installed."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _run(*cmd: str, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("env", _user_env())
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, **kwargs)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _uv() -> tuple[str, dict[str, str]]:
    return (shutil.which("uv", path=str(os.path.dirname(sys.executable))),
            {**_user_env(), "UV_SYSTEM_CERTS": "1"})  # the system's trust store, as pip uses


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The two wheels, as `make dist` builds them."""
    dist = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(REPO / "turing"),
         str(REPO), env={**_user_env(), "GEMMA4_T4_REPOSITORY_URL": REPOSITORY_REMOTE})
    return dist


# The repository setting `make dist` takes (docs/library.md), as a clone's ssh remote spells it.
REPOSITORY_REMOTE = "git@github.com:example/gemma4-t4.git"


@pytest.fixture(scope="module")
def installed(tmp_path_factory, dist):
    """An empty virtualenv outside the checkout with the two wheels and what they require, from the index: the
    library, without the operator tools' extra. Its command line's answer is kept here, before any test adds
    the extra."""
    work = tmp_path_factory.mktemp("user")
    uv, env = _uv()
    _run(uv, "venv", "--quiet", "--python", sys.executable, str(work / "venv"), env=env)
    python = work / "venv" / "bin" / "python"
    _run(uv, "pip", "install", "--quiet", "--python", str(python), *map(str, sorted(dist.glob("*.whl"))), env=env)
    bare_cli = subprocess.run([str(python), "-m", "gemma4_t4", "plan", "gce-t4"], capture_output=True, text=True,
                              cwd=work, timeout=300, env=_user_env())
    return work, python, bare_cli


@pytest.fixture(scope="module")
def with_ops(installed, dist):
    """The same virtualenv with the operator tools: gemma4-t4[ops]."""
    work, python, _ = installed
    uv, env = _uv()
    wheel = next(dist.glob("gemma4_t4-*.whl"))
    _run(uv, "pip", "install", "--quiet", "--python", str(python), f"gemma4-t4[ops] @ {wheel.as_uri()}", env=env)
    return work, python


def test_the_wheels_install_the_package_and_its_data_and_nothing_named_after_the_folders(installed):
    work, python, _ = installed
    found = json.loads(_run(str(python), "-c", "import json, importlib.resources as r, gemma4_t4, turing_clamp; "
                            "print(json.dumps([gemma4_t4.__file__, (r.files('gemma4_t4.cloudinit') / 'bootstrap.sh')"
                            ".is_file(), (r.files('gemma4_t4.turing') / 'Dockerfile').is_file(), "
                            "(r.files('gemma4_t4.components') / 'schema.json').is_file()]))", cwd=work).stdout)
    # The test's temporary folder may sit under the checkout (CI sets TMPDIR there): what matters is that
    # the import resolves inside the venv, not to the checkout's gemma4_t4/.
    assert Path(found[0]).is_relative_to(work / "venv") and all(found[1:])
    for name in ("components", "cloudinit"):
        assert _run(str(python), "-c", f"import importlib.util as u; print(u.find_spec('{name}') is None)",
                    cwd=work).stdout.strip() == "True"
    # The clamp's source is data there too: its code loads as turing_clamp alone.
    second = subprocess.run([str(python), "-c", "import gemma4_t4.turing.turing_clamp.policy"], capture_output=True,
                            text=True, cwd=work, env=_user_env())
    assert second.returncode == 1 and "import turing_clamp" in second.stderr, second.stderr


def test_a_users_program_builds_two_servers_and_an_endpoint_under_mocks(installed):
    work, python, _ = installed
    program = work / "program"
    shutil.copytree(REPO / "examples" / "python", program, ignore=shutil.ignore_patterns("venv"))
    (program / "run_mocks.py").write_text(RUNNER)
    registered = json.loads(_run(str(python), "run_mocks.py", cwd=program).stdout.splitlines()[-1])
    vms = {r["name"]: r["inputs"] for r in registered if r["type"] == "gcp:compute/instance:Instance"}
    assert sorted(vms) == ["batch", "chat"] and len({vm["name"] for vm in vms.values()}) == 2, "names collide"
    assert {r["type"] for r in registered} >= {"gemma4-t4:index:GceT4Server", "gemma4-t4:index:SageMakerT4Endpoint"}
    assert not [r for r in registered if r["type"] == "gcp:compute/network:Network" and r["name"] != "llm-net"], (
        "the servers use the program's network")
    # The guest is the stack program's for the same values.
    stack = clouds.offline_plan("gce-t4", clouds.stack_config("gce-t4", ["zone=us-central1-a", "maxModelLen=8192"],
                                                              REPO))
    assert vms["chat"]["metadata"]["user-data"] == stack.one("gcp:compute/instance:Instance").inputs["metadata"][
        "user-data"]


# The same program's test with the package's own mocks (gemma4_t4.testing, from the installed wheel).
PROVIDER_MOCKS_RUNNER = '''
import json, runpy
import pulumi
from gemma4_t4.testing import ProviderMocks

registered = []

class Recording(ProviderMocks):
    def new_resource(self, args):
        registered.append(args.typ)
        return super().new_resource(args)

''' + RUN_PROGRAM.format(mocks="Recording")


def test_the_installed_testing_module_builds_the_users_program(installed):
    work, python, _ = installed
    program = work / "program-provider-mocks"
    shutil.copytree(REPO / "examples" / "python", program, ignore=shutil.ignore_patterns("venv"))
    (program / "run_mocks.py").write_text(PROVIDER_MOCKS_RUNNER)
    registered = json.loads(_run(str(python), "run_mocks.py", cwd=program).stdout.splitlines()[-1])
    assert {"gemma4-t4:index:GceT4Server", "gemma4-t4:index:SageMakerT4Endpoint"} <= set(registered)


@pytest.mark.parametrize("stack", ["gce-t4", "sagemaker-t4"])
def test_the_installed_cli_plans_the_shipped_stacks_from_an_empty_directory(with_ops, stack):
    work, python = with_ops
    empty = work / f"empty-{stack}"
    empty.mkdir()
    plan = json.loads(_run(str(python), "-m", "gemma4_t4", "plan", stack, "--json", cwd=empty).stdout)
    assert plan["outputs"]["cloud"] == stack.split("-")[0] and plan["running_usd_per_hour"] > 0
    cost = json.loads(_run(str(python), "-m", "gemma4_t4", "cost", stack, "--json", cwd=empty).stdout)
    assert cost["running_usd_per_hour"] == plan["running_usd_per_hour"]
    preset = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]
    assert all(str(v) in json.dumps(plan) for v in preset.values())


def test_both_wheels_carry_the_license_the_readme_and_the_repositorys_url(dist):
    import zipfile

    wheels = sorted(dist.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["gemma4_t4", "gemma4_turing_clamp"]
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as whl:
            info = next(n.split("/")[0] for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
            assert whl.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
            metadata = whl.read(f"{info}/METADATA").decode().splitlines()
        assert {"License-Expression: Apache-2.0", "License-File: LICENSE"} <= set(metadata), wheel.name
        if wheel.name.startswith("gemma4_t4-"):
            # What a package index and `pip show` show: the README as the description, the repository's URL.
            assert {"Description-Content-Type: text/markdown",
                    "Project-URL: Repository, https://github.com/example/gemma4-t4"} <= set(metadata)
            assert "\n".join(metadata).rstrip().endswith((REPO / "README.md").read_text().rstrip())
            assert not [line for line in metadata if line.startswith("Provides-Extra:") and "ops" not in line]
    assert (REPO / "turing" / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()


def test_the_cli_without_the_ops_extra_says_in_one_line_what_to_install(installed):
    _, _, bare_cli = installed
    assert bare_cli.returncode == 1 and bare_cli.stdout == ""
    # The packages themselves, installed into this interpreter (gemma4-t4[ops] names nothing PyPI has); uv made this
    # virtualenv without pip, so the line is uv's.
    assert bare_cli.stderr.count("\n") == 1 and "needs the [ops] extra (missing: " in bare_cli.stderr
    assert "pip install --python " in bare_cli.stderr and "gemma4-t4[ops]" not in bare_cli.stderr
    assert "rich" in bare_cli.stderr and "Traceback" not in bare_cli.stderr


# A user's program, type-checked as a user would: mypy --strict against the installed library (py.typed).
TYPED_PROGRAM = '''
import pulumi

from gemma4_t4.components import GceT4Server, SageMakerT4Endpoint

chat = GceT4Server("chat", {"zone": "us-central1-a", "max_model_len": MAX_MODEL_LEN})
api = SageMakerT4Endpoint("api", {"endpoint_ttl": "8h"}, pulumi.ResourceOptions())
pulumi.export("endpoint", api.endpoint_name)
'''


def test_mypy_strict_sees_the_components_types_in_a_users_program(installed):
    work, python, _ = installed
    program = work / "typed"
    program.mkdir()
    (program / "good.py").write_text(TYPED_PROGRAM.replace("MAX_MODEL_LEN", "8192"))
    (program / "bad.py").write_text(TYPED_PROGRAM.replace("MAX_MODEL_LEN", '"8192"'))
    mypy = [str(Path(sys.executable).parent / "mypy"), "--strict", "--python-executable", str(python),
            "--cache-dir", str(program / ".mypy_cache")]
    # Without py.typed mypy would refuse the import ("missing library stubs or py.typed marker") under --strict.
    _run(*mypy, "good.py", cwd=program)
    bad = subprocess.run([*mypy, "bad.py"], capture_output=True, text=True, cwd=program, timeout=1200,
                         env=_user_env())
    assert bad.returncode == 1 and '"max_model_len" has type "int"' in bad.stdout, bad.stdout


@pytest.fixture(scope="module")
def floor(tmp_path_factory, dist) -> tuple[Path, dict[str, list[str]]]:
    """A program's virtualenv that already holds the lowest of every range pyproject.toml allows (uv's lowest-direct
    resolution of it, not the lock's versions), to which `pip install` then adds the two wheels: its python, and
    the versions of pulumi and the providers before and after the wheels came."""
    uv, env = _uv()
    work = tmp_path_factory.mktemp("floor")
    lowest = work / "lowest.txt"
    project = work / "project"
    project.mkdir()
    shutil.copy(REPO / "pyproject.toml", project / "pyproject.toml")
    (project / "turing").symlink_to(REPO / "turing")
    _run(uv, "pip", "compile", "--quiet", "--python-version", "3.11", "--resolution", "lowest-direct",
         "--no-emit-package", "gemma4-turing-clamp", "pyproject.toml", "-o", str(lowest), cwd=project, env=env)
    _run(sys.executable, "-m", "venv", str(work / "venv"))
    python = work / "venv" / "bin" / "python"
    _run(uv, "pip", "install", "--quiet", "--python", str(python), "-r", str(lowest), env=env)
    versions = ("import importlib.metadata as m; "
                "print(*(m.version(p) for p in ('pulumi', 'pulumi-gcp', 'pulumi-aws', 'pulumi-command')))")
    before = _run(str(python), "-c", versions).stdout.split()
    _run(str(python), "-m", "pip", "install", "--quiet", *map(str, sorted(dist.glob("*.whl"))))
    return python, {"before": before, "after": _run(str(python), "-c", versions).stdout.split()}


def test_installing_the_wheels_keeps_the_programs_own_allowed_provider_versions(floor):
    """A program that already holds older allowed providers (the lowest of every range: pulumi 3.260, pulumi-gcp
    10.0.0, pulumi-aws 7.0.0, pulumi-command 1.0.0) keeps them when `pip install` adds the wheels, and the example
    program builds with them: the ranges' floors are tested."""
    python, versions = floor
    assert versions["before"] == ["3.260.0", "10.0.0", "7.0.0", "1.0.0"]
    assert versions["after"] == versions["before"]
    program = python.parent.parent.parent / "program"
    shutil.copytree(REPO / "examples" / "python", program, ignore=shutil.ignore_patterns("venv"))
    (program / "run_mocks.py").write_text(RUNNER)
    registered = json.loads(_run(str(python), "run_mocks.py", cwd=program).stdout.splitlines()[-1])
    assert {r["type"] for r in registered} >= {"gemma4-t4:index:GceT4Server", "gemma4-t4:index:SageMakerT4Endpoint"}


@pytest.mark.parametrize("example", docs_examples.examples(), ids=lambda example: example.id)
def test_every_python_example_of_the_pages_runs_as_written_on_the_lowest_allowed_versions(floor, example, tmp_path):
    """The pages' examples (README.md, docs/*.md), read from them, on the floors of pyproject.toml's ranges:
    tests/cli/test_docs.py runs them on the lock's versions."""
    python, _ = floor
    done = docs_examples.run(example, python, tmp_path / "example")
    assert docs_examples.ran(done), f"{example.id}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_the_private_pulumi_apis_the_package_uses_work_as_it_uses_them_on_the_lowest_allowed_versions(floor,
                                                                                                      tmp_path):
    """tests/pulumi_private_probe.py on the floors (tests/components/test_package.py: on the lock's versions). On
    pulumi 3.231, the floor before, the experimental analyzer refused the components' Args (issubclass() arg 1 must
    be a class): the package failed for every other Pulumi language."""
    python, _ = floor
    (tmp_path / "probe.py").write_text((REPO / "tests" / "pulumi_private_probe.py").read_text())
    checks = json.loads(_run(str(python), "probe.py", cwd=tmp_path).stdout.splitlines()[-1])
    assert len(checks) == 6 and all(check["ok"] for check in checks.values()), checks
